"""``commopt config``: the effective configuration and where each value came from."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from commopt.cli.app import App
from commopt.cli.options import emit_json, format_option, pass_app


@click.command("config")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read this file instead of searching for commopt.toml / pyproject.toml.",
)
@format_option
@pass_app
def config_cmd(app: App, config_file: Path | None, fmt: str) -> None:
    """Show the effective configuration and the source of every value."""
    from commopt.config import load_config
    from commopt.schemas.config import EffectiveConfig, EffectiveSetting

    cfg = load_config(file=config_file)
    payload = EffectiveConfig(
        config_file=str(cfg.file) if cfg.file else None,
        settings={
            k: EffectiveSetting(value=cfg.values[k], source=cfg.sources[k]) for k in sorted(cfg.values)
        },
    )
    if fmt == "json":
        emit_json(app, payload)
        return
    table = Table(title=f"configuration ({payload.config_file or 'no config file found'})",
                  title_justify="left")
    table.add_column("setting")
    table.add_column("value")
    table.add_column("source")
    for key, setting in payload.settings.items():
        table.add_row(key, "-" if setting.value is None else str(setting.value), setting.source)
    app.out.print(table)
