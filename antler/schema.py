"""`antler schema`: JSON Schemas of the envelopes, for producers in other languages."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from antler._common import CliError
from bus import ENVELOPES


def schemas() -> dict[str, dict[str, object]]:
    return {name: model.model_json_schema() for name, model in ENVELOPES.items()}


def schema(args: argparse.Namespace) -> int:
    if args.list:
        for name, model in ENVELOPES.items():
            doc = (model.__doc__ or "").strip().splitlines()[0] if model.__doc__ else ""
            print(f"{name:26} {doc}")
        return 0
    everything = schemas()
    unknown = [n for n in args.names if n not in everything]
    if unknown:
        raise CliError(f"unknown envelope(s): {', '.join(unknown)}; see `antler schema --list`", code=2)
    chosen = {n: everything[n] for n in args.names} if args.names else everything
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for name, envelope_schema in chosen.items():
            (out / f"{name}.schema.json").write_text(
                json.dumps(envelope_schema, indent=2) + "\n", encoding="utf-8"
            )
        print(f"wrote {len(chosen)} schema(s) to {out}")
        return 0
    if len(args.names) == 1:
        print(json.dumps(chosen[args.names[0]], indent=2))
    else:
        print(json.dumps(chosen, indent=2))
    return 0
