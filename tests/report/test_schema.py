"""The JSON report validates against the OverlapReport JSON Schema (and the checker works).

Validation is the ``jsonschema`` package's (draft 2020-12, what pydantic emits), a test
dependency: a maintained validator covers every keyword, where our own subset checker had to
fail on keywords it did not know.
"""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator, ValidationError

from commopt.report.build import build_report, write_json
from commopt.schemas.report import ROOT_MODEL, OverlapReport
from tests.report.samples import durations, hand_sim, naive_order, naive_sim, two_groups


def validate(doc: dict, schema: dict) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``doc`` matches ``schema``."""
    Draft202012Validator.check_schema(schema)
    Draft202012Validator(schema).validate(doc)


def _report():
    g = two_groups()
    return build_report(g, naive_order(g), g.original_order, durations(g),
                        estimator_name="table", before_sim=naive_sim(g), after_sim=hand_sim(g))


def test_root_model_is_the_report():
    assert ROOT_MODEL is OverlapReport


def test_json_report_validates_against_its_schema(tmp_path):
    write_json(_report(), tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    validate(doc, OverlapReport.model_json_schema())
    assert OverlapReport.model_validate(doc) == _report()


def test_single_schedule_report_validates():
    g = two_groups()
    r = build_report(g, g.original_order, None, durations(g), estimator_name="t",
                     before_sim=hand_sim(g))
    validate(json.loads(r.model_dump_json()), OverlapReport.model_json_schema())


@pytest.mark.parametrize("breakage", [
    lambda d: d.pop("before"),
    lambda d: d.update(version=2),
    lambda d: d["before"]["collectives"][0]["reasons"].append({"code": "magic", "text": "x"}),
    lambda d: d["before"]["events"][0].update(start_us="soon"),
    lambda d: d.update(surprise=1),
])
def test_schema_check_rejects_broken_documents(breakage):
    doc = json.loads(_report().model_dump_json())
    breakage(doc)
    with pytest.raises(ValidationError):
        validate(doc, OverlapReport.model_json_schema())


def test_json_report_validates_against_the_committed_schema_file(repo_root):
    schema = json.loads((repo_root / "schemas" / "report.schema.json").read_text())
    validate(json.loads(_report().model_dump_json()), schema)
