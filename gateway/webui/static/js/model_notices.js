// A run's model notices: while the model is being tried again after a rate limit or an outage
// (`custom` events of type `llm_retry`), a status line under the answer says so ("retrying (2/5)…").
// It goes once the model writes again or the run ends. `model_finish` events need no line: the
// answer itself says it was cut or filtered.

import { el, textOf } from "./dom.js";

const notices = new WeakMap(); // conversation -> { text, written }

function written(conversation) {
  return [...conversation.live.values()].map((m) => textOf(m.content)).join("").length;
}

/** Take a `custom` event if it is a model notice (true), else leave it to others (false). */
export function noteModelEvent(conversation, data) {
  if (data?.type === "llm_retry") {
    const wait = Number(data.wait_seconds) >= 1 ? ` in ${Math.round(Number(data.wait_seconds))}s` : "";
    notices.set(conversation, {
      text: `The model is busy; retrying (${data.attempt}/${data.max_attempts})${wait}…`,
      written: written(conversation),
    });
    return true;
  }
  return data?.type === "model_finish";
}

/** The status line to show now, or null. */
export function modelNotice(conversation) {
  const notice = notices.get(conversation);
  if (!notice || !conversation.running || written(conversation) !== notice.written) return null;
  return el("div", { class: "run-note model-retry", role: "status", text: notice.text });
}
