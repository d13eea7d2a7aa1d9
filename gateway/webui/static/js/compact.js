// "Compact": the open conversation's older messages summarised now (POST /api/threads/{id}/compact),
// the same summary Antler writes by itself near the model's context window. Also the summary's look:
// a folded "Summary of earlier messages" instead of a user bubble.

import { call } from "./api.js";

/** Compact the thread now; what came of it, in words (never throws). */
export async function compactNow(threadId) {
  try {
    const result = await call(`/threads/${encodeURIComponent(threadId)}/compact`, { method: "POST", json: {} });
    if (result.compacted) {
      return { compacted: true, text: `Compacted: ${result.removed_message_count} earlier message(s) are now a summary.` };
    }
    return { compacted: false, text: `Nothing to compact: ${result.reason || "the conversation is short"}.` };
  } catch (error) {
    const busy = error.status === 409;
    return { compacted: false, failed: !busy, text: busy ? "Still answering: compact once the answer is in." : `Could not compact: ${error.message}` };
  }
}

/** Wire the button: `threadId()` is the open thread; `reload()` redraws it from its state after. */
export function wireCompact(button, { threadId, reload, toast }) {
  button.addEventListener("click", async () => {
    const id = threadId();
    if (!id) return;
    button.disabled = true;
    const label = button.textContent;
    button.textContent = "Compacting…";
    try {
      const done = await compactNow(id);
      toast(done.text, done.failed ? "error" : "info");
      if (done.compacted) await reload();
    } finally {
      button.disabled = false;
      button.textContent = label;
    }
  });
}

/** Whether a message is a summary that replaced older ones (LangChain marks it `lc_source`). */
export function isSummary(message) {
  return message.additional_kwargs?.lc_source === "summarization";
}

/** A summary, folded: what the older messages said, for whoever wants to read it. */
export function summaryBlock(message, el, text) {
  return el(
    "details",
    { class: "msg msg-summary" },
    el("summary", { text: "Summary of earlier messages" }),
    el("div", { class: "plain", text }),
  );
}
