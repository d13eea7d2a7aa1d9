"""`antler dlq list|show|replay`: inspect and recover dead letters.

A run's request (`runs.submit`) is not replayed once its run has ended: the runner ends a run whose
request it gives up (its chat or caller was told, with the error), and a replay would run nothing.
`--rerun` sends such a request again as a new run, for when the operator means its user to get a
second answer.
"""

from __future__ import annotations

import argparse
import json

from antler._common import CliError, load, login, nats_url, setup_logging
from bus import Bus, DeadLetter, EnvelopeError, decode, get_dead_letter, list_dead_letters, replay
from bus.messages import RunRecord, RunRequest, new_id, utcnow
from bus.records import RecordStore
from bus.runs import submit_run


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
            shown = await get_dead_letter(bus, args.seq)
            if shown is None:
                raise CliError(f"no dead letter with sequence {args.seq}", code=2)
            for key, value in sorted(shown.headers.items()):
                print(f"{key}: {value}")
            print()
            try:
                print(json.dumps(json.loads(shown.data), indent=2, ensure_ascii=False))
            except ValueError:
                print(shown.data.decode("utf-8", errors="replace"))
            return 0
        # replay
        targets = (
            [letter.seq for letter in await list_dead_letters(bus, limit=100_000)] if args.all else args.seqs
        )
        if not targets:
            raise CliError("nothing to replay: give sequence numbers or --all", code=2)
        counts = {"replayed": 0, "rerun": 0, "ended": 0}
        for seq in targets:
            dead = await get_dead_letter(bus, seq)
            if dead is None:
                print(f"{seq}: not found")
                continue
            done = await _ended_run(bus, dead, rerun=args.rerun, keep=args.keep)
            if done is not None:
                counts[done] += 1
                continue
            await replay(bus, dead, keep=args.keep)
            counts["replayed"] += 1
            print(f"{seq}: replayed to {dead.original_subject}")
        rerun = f"; {counts['rerun']} run(s) sent again as new runs" if counts["rerun"] else ""
        ended = f"; {counts['ended']} ended run(s) not replayed" if counts["ended"] else ""
        print(f"replayed {counts['replayed']} message(s){rerun}{ended}")
        return 0
    finally:
        await bus.close()


async def _ended_run(bus: Bus, letter: DeadLetter, *, rerun: bool, keep: bool) -> str | None:
    """For the request of a run that has ended: `ended` (said so, left in the DLQ) or, with `rerun`,
    `rerun` (sent again as a new run); None for anything to replay as it is."""
    if letter.original_subject != bus.subjects.runs_submit:
        return None
    try:
        request = decode(RunRequest, letter.data)
    except EnvelopeError:
        return None
    record = await RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord).get(request.run_id)
    if record is None or not record.status.finished:
        return None  # never ended (dead-lettered before runners ended given-up runs): it runs now
    how = record.status.value + (f": {record.error.message}" if record.error is not None else "")
    if not rerun:
        print(
            f"{letter.seq}: run {request.run_id} has ended ({how}); not replayed: it would run nothing, "
            "and its chat or caller was told. --rerun runs its request again as a new run"
        )
        return "ended"
    again = request.model_copy(
        update={
            "run_id": new_id(),
            "created_at": utcnow(),
            "after": None,
            "metadata": {**request.metadata, "rerun_of": request.run_id},
        }
    )
    await submit_run(bus, again)
    if not keep:
        await bus.js.delete_msg(bus.subjects.dlq_stream, letter.seq)
    print(
        f"{letter.seq}: run {request.run_id} runs again as run {again.run_id} (its chat gets that answer too)"
    )
    return "rerun"
