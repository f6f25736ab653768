"""``commopt passes``: the registered passes (built-in and plug-ins) and the default pipeline."""

from __future__ import annotations

import click

from commopt.cli.app import App
from commopt.cli.options import (
    emit_json,
    format_option,
    pass_app,
)


@click.command("passes")
@format_option
@pass_app
def passes_cmd(app: App, fmt: str) -> None:
    """List the registered passes (built-in and plug-ins) and the default pipeline."""
    from commopt.passes.base import DEFAULT_PIPELINE
    from commopt.passes.registry import get_registry
    from commopt.schemas.verify import PassInfo, PassList

    reg = get_registry()
    broken = {b.name: b.error for b in reg.check_all()}
    infos = []
    for name, entry in reg.entries.items():
        summary = None if name in broken else (reg.load(name).summary or None)
        infos.append(PassInfo(name=name, source=entry.source, summary=summary, broken=broken.get(name)))
    payload = PassList(default_pipeline=list(DEFAULT_PIPELINE), passes=infos)
    if fmt == "json":
        emit_json(app, payload)
        return
    from rich.table import Table

    t = Table(title="passes", title_justify="left")
    for col in ("name", "source", "what it does"):
        t.add_column(col)
    for p in infos:
        t.add_row(p.name, p.source, f"BROKEN: {p.broken}" if p.broken else (p.summary or ""))
    app.out.print(t)
    app.out.print(f"default pipeline: {','.join(payload.default_pipeline)}", markup=False)
    for p in infos:
        if p.broken:
            app.warn(f"pass plug-in {p.name!r} is broken: {p.broken}")
