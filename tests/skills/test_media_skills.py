"""The media skills end to end: a user starts each by its slash command, the scripted model runs
its script with `bash` in the bwrap sandbox, and the script calls a local fake of OpenAI's
generation endpoints (images, speech, videos), reached as `sandbox.environment` and
`sandbox.allow_network` configure it; the user gets the file. Music needs no endpoint (none is
standard): its score is rendered in the sandbox. Without a configured endpoint each script says
what to configure and makes nothing up.
"""

from __future__ import annotations

import asyncio
import io
import json
import uuid
import wave
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from sandbox.toolbox import Toolbox
from tests.fakes.media_server import SPEECH_RATE, FakeMedia, png
from tests.skills import scripted
from tests.skills.artifacts import png_size
from tests.skills.conftest import MEDIA_SKILLS, SKILLS
from tests.skills.scripted import OUT, WS, Stack, bash, present, ran_cleanly, use_skill, write
from tests.support.nats_users import SecuredServer

pytestmark = scripted.SKILL_RUNS

KEY = "sk-media-test"
SCRIPTS = "/mnt/skills/public"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def media() -> AsyncIterator[FakeMedia]:
    async with FakeMedia(api_key=KEY) as server:
        server.polls_until_done = 2
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    nats_server: SecuredServer, tmp_path_factory: pytest.TempPathFactory, toolbox: Toolbox, media: FakeMedia
) -> AsyncIterator[Stack]:
    environment = {
        "IMAGE_API_KEY": KEY,
        "IMAGE_API_BASE_URL": media.base_url,
        "IMAGE_MODEL": "gpt-image-1",
        "OPENAI_API_KEY": KEY,  # speech finds the endpoint through the OpenAI names
        "OPENAI_BASE_URL": media.base_url,
        "VIDEO_API_KEY": KEY,
        "VIDEO_API_BASE_URL": media.base_url,
    }
    tmp = tmp_path_factory.mktemp("media-skills")
    async with scripted.skill_stack(
        nats_server, tmp, toolbox, allow_network=True, environment=environment
    ) as stack:
        yield stack


def calls(media: FakeMedia, endpoint: str, since: int) -> list[dict[str, object]]:
    return [params for name, params in media.calls[since:] if name == endpoint]


async def image_generation(stack: Stack, media: FakeMedia) -> None:
    since = len(media.calls)
    thread = f"t-image-{uuid.uuid4().hex[:6]}"
    uploads = stack.uploads(thread)
    uploads.mkdir(parents=True, exist_ok=True)
    reference = png(8, 8, (10, 200, 30))
    (uploads / "bike.png").write_bytes(reference)
    prompt = {
        "prompt": "A cargo e-bike on a canal bridge at dawn",
        "style": "editorial photography",
        "negative_prompt": "text, logos",
    }
    script = f"python3 {SCRIPTS}/image-generation/scripts/generate_image.py"
    used = await use_skill(
        stack,
        "image-generation",
        "a wide picture of a cargo bike, and one in the style of my upload",
        write(f"{WS}/bike.json", prompt),
        bash(f"{script} --prompt-file {WS}/bike.json --out {OUT}/bike.png --aspect-ratio 16:9"),
        bash(
            f"{script} --prompt-file {WS}/bike.json --out {OUT}/bike-ref.png "
            "--reference-images /mnt/user-data/uploads/bike.png"
        ),
        present(f"{OUT}/bike.png", f"{OUT}/bike-ref.png"),
        thread=thread,
    )
    output = ran_cleanly(used)
    assert f"wrote {OUT}/bike.png: 1536x1024 PNG" in output
    assert "model gpt-image-1, 1 reference image(s)" in output
    (generated,) = calls(media, "images.generate", since)
    assert generated["model"] == "gpt-image-1"
    assert generated["size"] == "1536x1024", "16:9 asks for the landscape size"
    assert generated["prompt"] == (
        "A cargo e-bike on a canal bridge at dawn\nStyle: editorial photography\nAvoid: text, logos"
    )
    (edited,) = calls(media, "images.edit", since)
    assert edited["images"] == [reference], "the upload went to the edits endpoint as the reference"
    assert png_size((used.outputs / "bike.png").read_bytes()) == (1536, 1024)
    assert png_size((used.outputs / "bike-ref.png").read_bytes()) == (1024, 1024)


async def podcast_generation(stack: Stack, media: FakeMedia) -> None:
    since = len(media.calls)
    long_line = "It fell by half. " * 300  # over the API's 4096 characters: spoken in two calls
    script = {
        "title": "Heat pumps, explained",
        "hosts": {"Ada": {"voice": "nova"}, "Bo": {"voice": "onyx", "instructions": "curious"}},
        "lines": [
            {"speaker": "Ada", "text": "Germany sold half as many heat pumps last year."},
            {"speaker": "Bo", "text": "Why?"},
            {"speaker": "Ada", "text": long_line},
        ],
    }
    used = await use_skill(
        stack,
        "podcast-generation",
        "a short podcast about heat pump sales",
        write(f"{WS}/podcast.json", script),
        bash(
            f"python3 {SCRIPTS}/podcast-generation/scripts/make_podcast.py {WS}/podcast.json "
            f"--out {OUT}/heat.wav --transcript {OUT}/heat.md --pause 0.5"
        ),
        present(f"{OUT}/heat.wav", f"{OUT}/heat.md"),
    )
    assert "3 lines, 2 voices, model gpt-4o-mini-tts" in ran_cleanly(used)
    spoken = calls(media, "audio.speech", since)
    assert [c["voice"] for c in spoken] == ["nova", "onyx", "nova", "nova"]
    assert spoken[1]["instructions"] == "curious"
    assert all(len(str(c["input"])) <= 4096 for c in spoken)
    assert "".join(str(c["input"]) for c in spoken[2:]).replace(" ", "") == long_line.replace(" ", "")
    with wave.open(str(used.outputs / "heat.wav")) as episode:
        assert episode.getframerate() == SPEECH_RATE
        seconds = episode.getnframes() / SPEECH_RATE
    characters = sum(len(str(c["input"])) for c in spoken)
    assert seconds == pytest.approx(characters * 0.01 + 2 * 0.5, abs=0.05), "every line, with two pauses"
    transcript = (used.outputs / "heat.md").read_text(encoding="utf-8")
    assert transcript.startswith("# Heat pumps, explained\n\n**Ada:** Germany sold half")
    assert "**Bo:** Why?" in transcript


async def video_generation(stack: Stack, media: FakeMedia) -> None:
    since = len(media.calls)
    script = f"python3 {SCRIPTS}/video-generation/scripts/generate_video.py"
    used = await use_skill(
        stack,
        "video-generation",
        "an 8-second clip of a cargo bike",
        write(f"{WS}/clip.json", {"prompt": "A cargo bike crosses a bridge", "camera": "tracking shot"}),
        bash(f"{script} --prompt-file {WS}/clip.json --out {OUT}/clip.mp4 --wait 0 --seconds 8"),
        bash(f"{script} --resume video_1 --out {OUT}/clip.mp4 --poll-seconds 0.1; echo status=$?"),
        present(f"{OUT}/clip.mp4"),
    )
    started, finished = used.results["bash"]
    assert "still rendering: job video_1 is in_progress (50%); run again with --resume video_1" in started
    assert "[exit code 3]" in started
    assert f"wrote {OUT}/clip.mp4: MP4" in finished
    assert "status=0" in finished
    (created,) = calls(media, "videos.create", since)
    assert created == {
        "model": "sora-2",
        "prompt": "A cargo bike crosses a bridge\nCamera: tracking shot",
        "seconds": "8",
        "size": "1280x720",
    }
    assert (used.outputs / "clip.mp4").read_bytes()[4:8] == b"ftyp"


async def music_generation(stack: Stack, media: FakeMedia) -> None:
    score = {
        "title": "Morning",
        "tempo": 120,
        "tracks": [
            {"name": "melody", "instrument": "piano", "notes": "E4/1 G4/1 [C4 E4 G4]/2", "repeat": 2},
            {"name": "beat", "instrument": "drums", "notes": "kick/1 hat/1 snare/1 hat/1", "repeat": 2},
        ],
    }
    used = await use_skill(
        stack,
        "music-generation",
        "a short happy jingle",
        write(f"{WS}/score.json", score),
        bash(
            f"python3 {SCRIPTS}/music-generation/scripts/compose.py {WS}/score.json --out {OUT}/jingle.wav "
            f"--midi {OUT}/jingle.mid"
        ),
        write(f"{WS}/bad.json", {"tracks": [{"notes": "H4/1"}]}),
        bash(
            f"python3 {SCRIPTS}/music-generation/scripts/compose.py {WS}/bad.json --out {OUT}/bad.wav; "
            "echo s=$?"
        ),
        present(f"{OUT}/jingle.wav", f"{OUT}/jingle.mid"),
    )
    rendered, refused = used.results["bash"]
    assert f"wrote {OUT}/jingle.wav: 4.5 s, 2 tracks, 120 bpm; MIDI {OUT}/jingle.mid" in rendered
    assert "error: 'H4' is not a note" in refused
    assert "s=1" in refused
    with wave.open(io.BytesIO((used.outputs / "jingle.wav").read_bytes())) as song:
        frames = song.readframes(song.getnframes())
        assert song.getnframes() == 44_100 * 4.5, "8 beats at 120 bpm and half a second of tail"
    assert (
        max(abs(int.from_bytes(frames[i : i + 2], "little", signed=True)) for i in range(0, 88_200, 2))
        > 10_000
    )
    midi = (used.outputs / "jingle.mid").read_bytes()
    assert midi[:4] == b"MThd"
    assert midi[8:12] == b"\x00\x01\x00\x03", "format 1: a tempo track and one per score track"
    assert midi.count(b"MTrk") == 3
    assert bytes([0x99, 36, 96]) in midi, "the kick drum on the drum channel"


MEDIA_SKILL_TESTS: dict[str, Callable[[Stack, FakeMedia], Awaitable[None]]] = {
    "image-generation": image_generation,
    "podcast-generation": podcast_generation,
    "video-generation": video_generation,
    "music-generation": music_generation,
}


async def test_every_media_skill_has_an_end_to_end_test_here() -> None:
    assert set(MEDIA_SKILL_TESTS) == set(MEDIA_SKILLS)


@pytest.mark.parametrize("skill", list(MEDIA_SKILL_TESTS))
async def test_a_media_skill_reaches_its_configured_endpoint_from_the_sandbox_and_delivers_the_file(
    skill: str, stack: Stack, media: FakeMedia
) -> None:
    await MEDIA_SKILL_TESTS[skill](stack, media)


async def test_a_wrong_key_is_reported_with_the_providers_message(stack: Stack, media: FakeMedia) -> None:
    used = await use_skill(
        stack,
        "image-generation",
        "a picture",
        write(f"{WS}/p.json", {"prompt": "a cat"}),
        bash(
            f"IMAGE_API_KEY=sk-wrong python3 {SCRIPTS}/image-generation/scripts/generate_image.py "
            f"--prompt-file {WS}/p.json --out {OUT}/cat.png"
        ),
    )
    (output,) = used.results["bash"]
    assert "error: the images API answered 401 at " in output
    assert "Incorrect API key provided." in output
    assert not (used.outputs / "cat.png").exists()


@pytest.mark.parametrize(
    ("script", "arguments", "variable"),
    [
        pytest.param(
            "image-generation/scripts/generate_image.py",
            ["--prompt-file", "p.json", "--out", "x.png"],
            "IMAGE_API_KEY",
            id="image",
        ),
        pytest.param(
            "podcast-generation/scripts/make_podcast.py",
            ["podcast.json", "--out", "x.wav", "--transcript", "x.md"],
            "SPEECH_API_KEY",
            id="podcast",
        ),
        pytest.param(
            "video-generation/scripts/generate_video.py",
            ["--prompt-file", "p.json", "--out", "x.mp4"],
            "VIDEO_API_KEY",
            id="video",
        ),
    ],
)
async def test_without_a_configured_endpoint_the_script_says_what_to_configure_and_makes_nothing(
    toolbox: Toolbox, tmp_path: Path, script: str, arguments: list[str], variable: str
) -> None:
    (tmp_path / "p.json").write_text(json.dumps({"prompt": "a cat"}), encoding="utf-8")
    podcast = {"hosts": {"A": {"voice": "nova"}}, "lines": [{"speaker": "A", "text": "Hello."}]}
    (tmp_path / "podcast.json").write_text(json.dumps(podcast), encoding="utf-8")
    proc = await asyncio.create_subprocess_exec(
        str(toolbox.python_dir / "bin" / "python"),
        str(SKILLS / "public" / script),
        *arguments,
        cwd=tmp_path,
        env={"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    stderr = err.decode()
    assert proc.returncode == 2, stderr
    assert stderr.startswith("error: no ")
    assert f"set {variable}" in stderr
    assert "sandbox.environment in config.yaml, and sandbox.allow_network: true" in stderr
    assert not (tmp_path / arguments[arguments.index("--out") + 1]).exists()
    if variable == "SPEECH_API_KEY":
        assert (tmp_path / "x.md").read_text(encoding="utf-8").endswith("**A:** Hello.\n"), (
            "the transcript stays"
        )
