"""`antler dlq list|show|replay`: inspect and recover dead letters."""

from __future__ import annotations

import argparse
import json

from antler._common import CliError, load, login, nats_url, setup_logging
from bus import get_dead_letter, list_dead_letters, replay


async def dlq(args: argparse.Namespace) -> int:
    config = load(args)
    setup_logging(config, args.verbose)
    bus = await login(config).connect(nats_url(args, config), "antler-dlq")
    try:
        if args.dlq_command == "list":
            letters = await list_dead_letters(bus, limit=args.limit)
            if not letters:
                print("the dead-letter queue is empty")
                return 0
            print(f"{'SEQ':>6}  {'TIME':25}  {'CONSUMER':22} {'TRIES':>5}  SUBJECT / REASON")
            for letter in letters:
                print(
                    f"{letter.seq:>6}  {letter.time:25}  {letter.consumer[:22]:22} {letter.deliveries:>5}  "
                    f"{letter.original_subject}\n{'':>8}{letter.reason}"
                )
            return 0
        if args.dlq_command == "show":
            letter = await get_dead_letter(bus, args.seq)
            if letter is None:
                raise CliError(f"no dead letter with sequence {args.seq}", code=2)
            for key, value in sorted(letter.headers.items()):
                print(f"{key}: {value}")
            print()
            try:
                print(json.dumps(json.loads(letter.data), indent=2, ensure_ascii=False))
            except ValueError:
                print(letter.data.decode("utf-8", errors="replace"))
            return 0
        # replay
        targets = (
            [letter.seq for letter in await list_dead_letters(bus, limit=100_000)] if args.all else args.seqs
        )
        if not targets:
            raise CliError("nothing to replay: give sequence numbers or --all", code=2)
        replayed = 0
        for seq in targets:
            letter = await get_dead_letter(bus, seq)
            if letter is None:
                print(f"{seq}: not found")
                continue
            await replay(bus, letter, keep=args.keep)
            replayed += 1
            print(f"{seq}: replayed to {letter.original_subject}")
        print(f"replayed {replayed} message(s)")
        return 0
    finally:
        await bus.close()
