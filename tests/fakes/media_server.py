"""A fake of OpenAI's generation endpoints behind real HTTP, as the media skills call them:
`POST /v1/images/generations` and `/v1/images/edits` (b64 PNGs), `POST /v1/audio/speech` (WAV),
and the Videos API (`POST /v1/videos`, `GET /v1/videos/{id}`, `GET /v1/videos/{id}/content`).

Every call is recorded in `calls` as (endpoint, parameters); a wrong key gets OpenAI's 401 error."""

from __future__ import annotations

import base64
import io
import struct
import wave
import zlib
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from tests.fakes._server import LocalServer

SPEECH_RATE = 24_000  # OpenAI's speech is 24 kHz, 16-bit mono


def png(width: int, height: int, rgb: tuple[int, int, int] = (200, 80, 40)) -> bytes:
    """A solid-colour PNG of the given size."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    row = b"\x00" + bytes(rgb) * width
    body = zlib.compress(row * height)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b"")


def speech_wav(text: str) -> bytes:
    """A WAV whose length grows with the text (10 ms a character), like spoken text."""
    frames = int(SPEECH_RATE * 0.01 * len(text))
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SPEECH_RATE)
        out.writeframes(b"\x01\x00" * frames)
    return buffer.getvalue()


MP4 = b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom" + b"\x00" * 64  # an MP4's first box


class FakeMedia(LocalServer):
    """Use `async with FakeMedia(api_key="sk-media") as media:`; `media.base_url` ends in /v1."""

    def __init__(self, api_key: str) -> None:
        super().__init__()
        self.api_key = api_key
        self.videos: dict[str, dict[str, Any]] = {}
        self.polls_until_done = 2  # a video is `in_progress` for this many status calls
        self.app = FastAPI()
        self.app.post("/v1/images/generations")(self._generate_image)
        self.app.post("/v1/images/edits")(self._edit_image)
        self.app.post("/v1/audio/speech")(self._speech)
        self.app.post("/v1/videos")(self._create_video)
        self.app.get("/v1/videos/{video_id}")(self._video)
        self.app.get("/v1/videos/{video_id}/content")(self._video_content)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _refused(self, request: Request) -> JSONResponse | None:
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            error = {
                "message": "Incorrect API key provided.",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
            return JSONResponse({"error": error}, status_code=401)
        return None

    def _image_answer(self, size: str) -> dict[str, Any]:
        width, height = (int(n) for n in size.split("x")) if "x" in size else (1024, 1024)
        return {"created": 0, "data": [{"b64_json": base64.b64encode(png(width, height)).decode()}]}

    async def _generate_image(self, request: Request) -> Any:
        refused = self._refused(request)
        if refused:
            return refused
        body = await request.json()
        self.calls.append(("images.generate", body))
        self.changed()
        if not body.get("prompt"):
            return JSONResponse({"error": {"message": "prompt is required"}}, status_code=400)
        return self._image_answer(str(body.get("size", "1024x1024")))

    async def _edit_image(self, request: Request) -> Any:
        refused = self._refused(request)
        if refused:
            return refused
        form = await request.form()
        images = [await item.read() for key, item in form.multi_items() if key in ("image", "image[]")]  # type: ignore[union-attr]
        params = {k: v for k, v in form.multi_items() if isinstance(v, str)}
        self.calls.append(("images.edit", {**params, "images": images}))
        self.changed()
        return self._image_answer(str(params.get("size", "1024x1024")))

    async def _speech(self, request: Request) -> Any:
        refused = self._refused(request)
        if refused:
            return refused
        body = await request.json()
        self.calls.append(("audio.speech", body))
        self.changed()
        if body.get("response_format") != "wav":
            return JSONResponse({"error": {"message": "this fake speaks wav only"}}, status_code=400)
        return Response(speech_wav(str(body["input"])), media_type="audio/wav")

    async def _create_video(self, request: Request) -> Any:
        refused = self._refused(request)
        if refused:
            return refused
        if request.headers.get("content-type", "").startswith("multipart/"):
            form = await request.form()
            body: dict[str, Any] = {k: v for k, v in form.multi_items() if isinstance(v, str)}
            reference = form.get("input_reference")
            body["input_reference"] = await reference.read() if reference is not None else None  # type: ignore[union-attr]
        else:
            body = await request.json()
        self.calls.append(("videos.create", body))
        self.changed()
        video_id = f"video_{len(self.videos) + 1}"
        self.videos[video_id] = {"id": video_id, "object": "video", "status": "queued", "progress": 0,
                                 "model": body.get("model"), "seconds": body.get("seconds"),
                                 "size": body.get("size"), "polls": 0}  # fmt: skip
        return self._public(video_id)

    def _public(self, video_id: str) -> dict[str, Any]:
        return {k: v for k, v in self.videos[video_id].items() if k != "polls"}

    async def _video(self, video_id: str, request: Request) -> Any:
        refused = self._refused(request)
        if refused:
            return refused
        if video_id not in self.videos:
            return JSONResponse({"error": {"message": f"no video {video_id}"}}, status_code=404)
        video = self.videos[video_id]
        video["polls"] += 1
        self.calls.append(("videos.retrieve", {"id": video_id}))
        if video["polls"] > self.polls_until_done:
            video.update(status="completed", progress=100)
        else:
            video.update(status="in_progress", progress=50)
        return self._public(video_id)

    async def _video_content(self, video_id: str, request: Request) -> Any:
        refused = self._refused(request)
        if refused:
            return refused
        if self.videos.get(video_id, {}).get("status") != "completed":
            return JSONResponse({"error": {"message": "the video is not ready"}}, status_code=404)
        self.calls.append(("videos.content", {"id": video_id}))
        return Response(MP4, media_type="video/mp4")
