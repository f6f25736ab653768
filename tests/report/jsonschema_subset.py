"""A validator for the JSON Schema subset pydantic emits (no jsonschema dependency).

Supports ``$ref`` into ``$defs``, ``type``, ``properties``, ``required``,
``additionalProperties``, ``items``, ``anyOf``, ``enum`` and ``const``; any other keyword
fails loudly so the subset cannot silently stop covering the schema.
"""

from __future__ import annotations

from typing import Any

_TYPES = {
    "object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
}
_IGNORED = {"title", "description", "default", "examples", "$schema"}
_KNOWN = {"$ref", "$defs", "type", "properties", "required", "additionalProperties", "items",
          "anyOf", "enum", "const"} | _IGNORED


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[name])


def validate(value: Any, schema: dict[str, Any], root: dict[str, Any] | None = None,
             path: str = "$") -> None:
    """Raise AssertionError naming the JSON path where ``value`` breaks ``schema``."""
    root = root if root is not None else schema
    unknown = set(schema) - _KNOWN
    assert not unknown, f"{path}: schema keywords outside the subset: {sorted(unknown)}"
    if "$ref" in schema:
        ref = schema["$ref"]
        assert ref.startswith("#/$defs/"), ref
        validate(value, root["$defs"][ref.removeprefix("#/$defs/")], root, path)
    if "anyOf" in schema:
        errors = []
        for option in schema["anyOf"]:
            try:
                validate(value, option, root, path)
                break
            except AssertionError as exc:
                errors.append(str(exc))
        else:
            raise AssertionError(f"{path}: matches no anyOf option: {errors}")
    if "const" in schema:
        assert value == schema["const"], f"{path}: {value!r} != {schema['const']!r}"
    if "enum" in schema:
        assert value in schema["enum"], f"{path}: {value!r} not in {schema['enum']}"
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        assert any(_is_type(value, t) for t in types), f"{path}: {value!r} is not {types}"
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            assert key in value, f"{path}: missing required {key!r}"
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                validate(item, props[key], root, f"{path}.{key}")
            elif extra is False:
                raise AssertionError(f"{path}: unexpected property {key!r}")
            elif isinstance(extra, dict):
                validate(item, extra, root, f"{path}.{key}")
    if isinstance(value, list) and "items" in schema:
        for k, item in enumerate(value):
            validate(item, schema["items"], root, f"{path}[{k}]")
