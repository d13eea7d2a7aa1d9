// The browser's live view: while the agent browses, its latest screenshot beside the conversation.
// Each browser tool message names the frame it left (`additional_kwargs.browser_view`: the
// screenshot's path in the thread's outputs, the page's URL and title); the panel shows the newest,
// fetched again whenever a newer step names it (the file is rewritten in place). Closing the panel
// hides it until the next browser step.

import { artifactBlob } from "./api.js";

const state = { key: null, closed: null, url: null, loading: null };

/** The newest browser step of `messages`: `{key, view}`, or null when the agent never browsed. */
export function latestBrowserView(messages) {
  for (let i = messages.length - 1; i >= 0; i -= 1) {
    const message = messages[i];
    const view = message.type === "tool" ? message.additional_kwargs?.browser_view : null;
    if (view?.screenshot) return { key: `${message.id || message.tool_call_id}:${view.screenshot}`, view };
  }
  return null;
}

function panel() {
  return document.getElementById("browser-view");
}

/** Show (or hide) the live view for this thread's messages; call it on every redraw. */
export async function showBrowserView(threadId, messages) {
  const box = panel();
  if (!box) return;
  const latest = threadId ? latestBrowserView(messages) : null;
  if (!latest || latest.key === state.closed) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  if (latest.key === state.key) return;
  state.key = latest.key;
  const { view } = latest;
  box.querySelector(".browser-title").textContent = view.title || "Browser";
  const link = box.querySelector(".browser-url");
  link.textContent = view.url || "";
  link.title = view.url || "";
  const loading = (state.loading = artifactBlob(threadId, view.screenshot));
  let blob;
  try {
    blob = await loading;
  } catch {
    return; // the frame is not there (yet): the previous one stays
  }
  if (state.loading !== loading) return; // a newer frame is on its way
  if (state.url) URL.revokeObjectURL(state.url);
  state.url = URL.createObjectURL(blob);
  const image = box.querySelector("img");
  image.src = state.url;
  image.alt = `The browser's page: ${view.title || view.url || "screenshot"}`;
}

/** The close button: hidden until the agent's next browser step. */
export function wireBrowserView() {
  const box = panel();
  box?.querySelector(".browser-close")?.addEventListener("click", () => {
    state.closed = state.key;
    box.hidden = true;
  });
}
