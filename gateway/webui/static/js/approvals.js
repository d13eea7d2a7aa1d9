// Tool calls waiting for a person's yes (docs/agent.md, "Approvals and steering"): what waits in a
// thread (its state's interrupts), the card under the conversation that answers one, and the answer
// itself, LangGraph's resume: the card's buttons and `/approve` / `/deny` (commands.js) send the same.

import { el } from "./dom.js";

const APPROVAL = "approval_request"; // the interrupt value's type (agents/graph/approvals.py)

/** The approval requests a thread's state (`GET /threads/{id}/state`) waits on. */
export function waitingIn(threadState) {
  return (threadState?.interrupts || []).map((i) => i.value).filter((v) => v && v.type === APPROVAL);
}

/**
 * The resume value answering request `id`: `approve` (this call), `always` (this call and the tool's
 * later calls in the thread) or `deny`, with a reason the model reads.
 */
export function resumeOf(id, decision, reason = "") {
  const resume = { approval_id: id, decision };
  if (decision === "deny" && reason) resume.reason = reason;
  return resume;
}

/** What the card says once `resume` was sent for `request`, while the run goes on. */
function outcome(request, resume) {
  if (resume.decision === "always") return `Approved for this conversation: ${request.tool} runs without asking here from now on.`;
  if (resume.decision === "approve") return `Approved: ${request.tool} runs now.`;
  return `Denied${resume.reason ? ` (${resume.reason})` : ""}: the agent was told.`;
}

function expiry(request) {
  const when = new Date(Number(request.expires_at) * 1000);
  if (!request.expires_at || Number.isNaN(when.getTime())) return null;
  const time = when.toLocaleString([], { dateStyle: when.toDateString() === new Date().toDateString() ? undefined : "short", timeStyle: "short" });
  return el("div", { class: "approval-expiry", text: `Unanswered by ${time}, it counts as denied.` });
}

/**
 * The card for `request` (an `approval_request` interrupt value): what the tool would do, and the
 * buttons answering it, `answer(resume)` each; once answered (`sent`: the resume value), what was
 * decided. The command a shell call would run is shown as it is; other calls by their description,
 * with all their arguments a click away.
 */
export function approvalCard(request, sent, answer) {
  const label = `Approval needed: ${request.tool}`;
  if (sent) return el("section", { class: "approval approval-answered", role: "status", "aria-label": label, text: outcome(request, sent) });
  const args = request.args || {};
  const command = typeof args.command === "string" ? args.command : null;
  const shown = command ?? request.description ?? request.tool;
  const others = Object.keys(args).filter((key) => !(command !== null && key === "command"));
  const reason = el("input", { type: "text", class: "approval-reason", placeholder: "Reason (optional, the agent reads it)", "aria-label": "Reason for denying (optional)" });
  const deny = el("form", { class: "approval-deny" }, reason, el("button", { type: "submit", class: "danger", text: "Deny" }));
  deny.addEventListener("submit", (event) => {
    event.preventDefault();
    answer(resumeOf(request.approval_id, "deny", reason.value.trim()));
  });
  return el(
    "section",
    { class: "approval", role: "group", "aria-label": label, "data-approval": request.approval_id },
    el("div", { class: "approval-head" }, "The agent wants to use ", el("strong", { class: "approval-tool", text: request.tool }), command !== null ? " to run:" : ":"),
    el("pre", { class: "approval-what", text: shown }),
    others.length ? el("details", { class: "approval-args" }, el("summary", { text: "All arguments" }), el("pre", { text: JSON.stringify(args, null, 2) })) : null,
    el(
      "div",
      { class: "approval-actions" },
      el("button", { type: "button", class: "primary", text: "Approve", onclick: () => answer(resumeOf(request.approval_id, "approve")) }),
      el("button", {
        type: "button",
        text: "Always for this thread",
        title: `Approve, and let ${request.tool} run without asking in this conversation from now on`,
        onclick: () => answer(resumeOf(request.approval_id, "always")),
      }),
    ),
    deny,
    expiry(request),
  );
}
