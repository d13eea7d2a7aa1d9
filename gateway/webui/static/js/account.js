// Settings → Account: who you are here (your role and what it allows), what you used today and this
// month against your budget (GET /api/usage), and "Connect a chat": the code `/connect` gave in a
// chat, entered here, makes that chat user you (POST /api/v1/connect).

import { settings } from "./api.js";
import { el } from "./dom.js";

/** One period's use as a line: "Today: 120 tokens of 20000, cost 0.0012 (resets …)". */
function usageLine(p) {
  const label = p.period === "day" ? "Today" : "This month";
  const tokens = `${p.tokens} tokens${p.token_limit != null ? ` of ${p.token_limit}` : ""}`;
  const cost = p.cost || p.cost_limit != null ? `, cost ${p.cost.toFixed(4)}${p.cost_limit != null ? ` of ${p.cost_limit}` : ""}` : "";
  return `${label}: ${tokens}${cost} (resets ${new Date(p.resets_at).toLocaleString()})`;
}

function usageRows(periods) {
  return periods.map((p) => el("li", { "data-period": p.period, text: usageLine(p) }));
}

/** `/usage` typed in the web UI: the same as in a chat. */
export async function usageText() {
  const mine = (await settings.usage()).people[0];
  return [`Your usage (role '${mine.role}'):`, ...mine.periods.map(usageLine)].join("\n");
}

export async function accountPage(body, toast) {
  const [profile, usage] = await Promise.all([settings.profile(), settings.usage()]);
  const mine = usage.people[0] || { periods: [] };
  const code = el("input", { type: "text", placeholder: "ABCD-EFGH", "aria-label": "Connect code", required: true, autocomplete: "off" });
  const connect = el("form", { class: "row" }, code, el("button", { type: "submit", class: "primary", text: "Connect" }));
  const result = el("p", { class: "muted connect-result", role: "status" });
  connect.addEventListener("submit", (event) => {
    event.preventDefault();
    settings
      .connect(code.value.trim())
      .then((linked) => {
        result.textContent = `Connected: ${linked.chat_user} is you now. Its next message starts a conversation of yours.`;
        code.value = "";
        toast("Chat connected");
      })
      .catch((error) => {
        result.textContent = "";
        toast(error.message, "error");
      });
  });
  body.replaceChildren(
    el("h2", { text: "Account" }),
    el("p", { class: "account-who", text: `${profile.email || profile.id} · role ${profile.role}` }),
    el("p", { class: "muted", text: `Models you may use: ${profile.available_models.join(", ") || "none"}` }),
    el("h3", { text: "Usage" }),
    el("ul", { class: "usage" }, usageRows(mine.periods)),
    el("h3", { text: "Connect a chat" }),
    el("p", { class: "muted", text: "Send /connect to Antler in Slack, Telegram or another chat and enter the code it answers: that chat becomes you (your memory, role and conversations)." }),
    connect,
    result,
  );
}
