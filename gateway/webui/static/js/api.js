// The gateway's public API, as this page uses it: JSON calls, files, and run streams (SSE).

import { headers } from "./auth.js";

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function failure(response) {
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (typeof body.detail === "string") message = body.detail;
    else if (body.detail?.message) message = body.detail.message;
  } catch {
    /* not JSON */
  }
  return new ApiError(response.status, message);
}

/** A call to `/api<path>`; JSON in (`json`) and out. Errors throw ApiError with the gateway's detail. */
export async function call(path, { method = "GET", json, body, signal, raw = false, extraHeaders = {} } = {}) {
  const init = { method, headers: { ...headers(method), ...extraHeaders }, credentials: "same-origin", signal };
  if (json !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(json);
  } else if (body !== undefined) {
    init.body = body;
  }
  const response = await fetch(`/api${path}`, init);
  if (!response.ok) throw await failure(response);
  if (raw) return response;
  if (response.status === 204 || response.status === 202) return null;
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

const q = encodeURIComponent;

export const threads = {
  search: (limit = 100) =>
    call("/threads/search", {
      method: "POST",
      json: { limit, sort_by: "updated_at", sort_order: "desc", select: ["thread_id", "created_at", "updated_at", "metadata", "status", "values"] },
    }),
  create: (thread_id, metadata = {}) => call("/threads", { method: "POST", json: { thread_id, if_exists: "do_nothing", metadata } }),
  get: (id) => call(`/threads/${q(id)}`),
  state: (id) => call(`/threads/${q(id)}/state`),
  patch: (id, metadata) => call(`/threads/${q(id)}`, { method: "PATCH", json: { metadata } }),
  updateState: (id, values) => call(`/threads/${q(id)}/state`, { method: "POST", json: { values } }),
  remove: (id) => call(`/threads/${q(id)}`, { method: "DELETE" }),
  runs: (id, limit = 1) => call(`/threads/${q(id)}/runs?limit=${limit}`),
  cancel: (id, runId) => call(`/threads/${q(id)}/runs/${q(runId)}/cancel`, { method: "POST" }),
  uploads: (id) => call(`/threads/${q(id)}/uploads/list`),
  upload: (id, files) => {
    const form = new FormData();
    for (const file of files) form.append("files", file, file.name);
    return call(`/threads/${q(id)}/uploads`, { method: "POST", body: form });
  },
  suggestions: (id, messages) => call(`/threads/${q(id)}/suggestions`, { method: "POST", json: { messages, n: 3 } }),
};

/** An artifact (or upload) of a thread as a Blob: fetched with our headers, so it works with tokens. */
export async function artifactBlob(threadId, virtualPath, download = false) {
  const path = virtualPath.replace(/^\/+/, "").split("/").map(q).join("/");
  const response = await call(`/threads/${q(threadId)}/artifacts/${path}${download ? "?download=true" : ""}`, { raw: true });
  return response.blob();
}

export const settings = {
  models: () => call("/models"),
  memory: () => call("/memory"),
  clearMemory: () => call("/memory", { method: "DELETE" }),
  addFact: (content, category) => call("/memory/facts", { method: "POST", json: { content, category } }),
  editFact: (id, content) => call(`/memory/facts/${q(id)}`, { method: "PATCH", json: { content } }),
  deleteFact: (id) => call(`/memory/facts/${q(id)}`, { method: "DELETE" }),
  mcp: () => call("/mcp/config"),
  patchMcp: (servers) => call("/mcp/config", { method: "PATCH", json: { mcp_servers: servers } }),
  profile: () => call("/user-profile"),
  usage: () => call("/usage"),
  connect: (code) => call("/v1/connect", { method: "POST", json: { code } }),
};

/** Split an SSE byte stream into `{event, data, id}` frames (comments and heartbeats skipped). */
async function* frames(response, signal) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  const onAbort = () => reader.cancel().catch(() => {});
  signal?.addEventListener("abort", onAbort);
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n?/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const frame = { event: "message", data: "", id: null };
        for (const line of block.split("\n")) {
          if (!line || line.startsWith(":")) continue;
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (field === "event") frame.event = text;
          else if (field === "data") frame.data += text;
          else if (field === "id") frame.id = text;
        }
        if (!frame.data) continue;
        try {
          frame.data = JSON.parse(frame.data);
        } catch {
          /* leave as text */
        }
        yield frame;
      }
    }
  } finally {
    signal?.removeEventListener("abort", onAbort);
  }
}

export const STREAM_MODES = ["values", "messages-tuple", "custom"];

/**
 * A run's events: start one (`start: body`) or join a running one (`join: runId`), and keep
 * reading until `end`. A broken connection is picked up again with `Last-Event-ID`, so
 * nothing is missed or repeated; `onEvent(frame)` gets each event, `onRun(runId)` the run id.
 */
export async function streamRun(threadId, { start, join, signal, onEvent, onRun }) {
  let runId = join || null;
  let lastId = null;
  let response;
  for (let attempt = 0; ; attempt++) {
    if (runId === null) {
      response = await call(`/threads/${q(threadId)}/runs/stream`, {
        method: "POST",
        json: start,
        signal,
        raw: true,
        extraHeaders: { Accept: "text/event-stream" },
      });
      const location = response.headers.get("Content-Location") || "";
      runId = location.split("/runs/").pop() || null;
      if (runId) onRun?.(runId);
    } else {
      const extra = { Accept: "text/event-stream" };
      if (lastId) extra["Last-Event-ID"] = lastId;
      if (attempt === 0 && join) onRun?.(runId);
      response = await call(`/threads/${q(threadId)}/runs/${q(runId)}/stream`, { signal, raw: true, extraHeaders: extra });
    }
    try {
      for await (const frame of frames(response, signal)) {
        if (frame.id) lastId = frame.id;
        if (frame.event === "metadata" && frame.data?.run_id && !runId) {
          runId = frame.data.run_id;
          onRun?.(runId);
        }
        onEvent(frame);
        if (frame.event === "end") return;
      }
    } catch (error) {
      if (signal?.aborted) return;
      if (attempt >= 5 || !runId) throw error;
    }
    if (signal?.aborted) return;
    if (!runId || attempt >= 5) throw new Error("the answer's stream ended early");
    await new Promise((resolve) => setTimeout(resolve, 500 * (attempt + 1)));
  }
}
