// Settings pages: memory (view, edit, delete facts), skills (skills.js), MCP servers
// (view, enable/disable).

import { settings } from "./api.js";
import { confirmInPage } from "./confirm.js";
import { el } from "./dom.js";
import { icon } from "./icons.js";
import { skillsPage } from "./skills.js";
import { schedulesPage } from "./schedules.js";
import { accountPage } from "./account.js";

const SECTIONS = [
  ["user", "workContext", "Work"],
  ["user", "personalContext", "Personal"],
  ["user", "topOfMind", "Top of mind"],
  ["history", "recentMonths", "Recent months"],
  ["history", "earlierContext", "Earlier"],
  ["history", "longTermBackground", "Background"],
];

/** Replace `body`'s content with the given nodes, skipping the absent ones (null, false). */
function fill(body, ...children) {
  body.replaceChildren(...children.filter(Boolean));
}

function failed(body, error) {
  body.replaceChildren(el("p", { class: "error", role: "alert", text: error.message }));
}

async function memoryPage(body, toast) {
  const doc = await settings.memory();
  const redo = () => memoryPage(body, toast).catch((e) => failed(body, e));
  const act = (promise, done) =>
    promise.then(() => (toast(done), redo())).catch((error) => toast(error.message, "error"));
  const summaries = SECTIONS.map(([group, key, label]) => [label, doc[group]?.[key]?.summary || ""]).filter(([, s]) => s);
  const facts = doc.facts || [];
  const content = el("input", { type: "text", placeholder: "Something Antler should remember", "aria-label": "New fact", required: true });
  const add = el("form", { class: "row" }, content, el("button", { type: "submit", class: "primary", text: "Add fact" }));
  add.addEventListener("submit", (event) => {
    event.preventDefault();
    act(settings.addFact(content.value.trim(), "context"), "Fact added");
  });
  const factRow = (fact) => {
    const row = el(
      "li",
      { class: "fact", "data-fact": fact.id },
      el("span", { class: "fact-text", text: fact.content }),
      el("span", { class: "badge", text: fact.category }),
      el("button", { type: "button", class: "icon small", "aria-label": "Edit fact", onclick: () => edit() }, icon("edit")),
      el("button", { type: "button", class: "icon small", "aria-label": "Delete fact", onclick: () => act(settings.deleteFact(fact.id), "Fact deleted") }, icon("remove")),
    );
    const edit = () => {
      const input = el("input", { type: "text", value: fact.content, "aria-label": "Fact" });
      const form = el("form", { class: "row" }, input, el("button", { type: "submit", class: "primary", text: "Save" }));
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        act(settings.editFact(fact.id, input.value.trim()), "Fact saved");
      });
      row.replaceChildren(form);
      input.focus();
    };
    return row;
  };
  fill(
    body,
    el("h2", { text: "Memory" }),
    el("p", { class: "muted", text: "What Antler remembers about you across conversations. It updates itself after conversations; you can correct it here." }),
    summaries.length
      ? el("dl", { class: "summaries" }, summaries.map(([label, text]) => [el("dt", { text: label }), el("dd", { text })]))
      : el("p", { class: "muted", text: "No summary yet." }),
    el("h3", { text: `Facts (${facts.length})` }),
    el("ul", { class: "facts" }, facts.map(factRow)),
    add,
    facts.length || summaries.length
      ? el("button", {
          type: "button",
          class: "danger",
          text: "Forget everything",
          onclick: async () => {
            if (await confirmInPage("Forget everything Antler remembers about you?", "Forget everything")) {
              act(settings.clearMemory(), "Memory cleared");
            }
          },
        })
      : null,
  );
}

async function mcpPage(body, toast) {
  const config = await settings.mcp();
  const servers = Object.entries(config.mcp_servers || {});
  const status = config.status || {};
  fill(
    body,
    el("h2", { text: "MCP servers" }),
    el("p", { class: "muted", text: "Tool servers from extensions_config.json. Changes reach every runner at once (admins only)." }),
    servers.length ? null : el("p", { class: "muted", text: "No MCP servers configured." }),
    el(
      "ul",
      { class: "cards" },
      servers.map(([name, server]) => {
        const enabled = server.enabled !== false;
        const box = el("input", { type: "checkbox", checked: enabled, "aria-label": `Enable ${name}` });
        box.addEventListener("change", () =>
          settings
            .patchMcp({ [name]: { ...server, enabled: box.checked } })
            .then(() => toast(`${name} ${box.checked ? "enabled" : "disabled"}`))
            .catch((error) => {
              box.checked = !box.checked;
              toast(error.message, "error");
            }),
        );
        const where = Object.entries(status[name] || {});
        return el(
          "li",
          { class: "card", "data-mcp": name },
          el("label", { class: "switch" }, box, el("strong", { text: name })),
          el("span", { class: "badge", text: server.type || (server.url ? "http" : "stdio") }),
          el("p", { class: "muted mono", text: server.url || [server.command, ...(server.args || [])].filter(Boolean).join(" ") }),
          where.length
            ? el(
                "ul",
                { class: "status" },
                where.map(([process, s]) =>
                  el("li", { class: s.ok ? "ok" : "error", text: `${process}: ${s.ok ? `ok${s.tools ? `, ${Array.isArray(s.tools) ? s.tools.length : s.tools} tools` : ""}` : s.error || "failed"}` }),
                ),
              )
            : null,
        );
      }),
    ),
  );
}

const PAGES = { memory: memoryPage, skills: skillsPage, mcp: mcpPage, schedules: schedulesPage, account: accountPage };

export async function showSettings(tab, body, toast) {
  document.querySelectorAll(".tabs a").forEach((a) => a.classList.toggle("active", a.dataset.tab === tab));
  body.replaceChildren(el("p", { class: "muted", text: "Loading…" }));
  try {
    await (PAGES[tab] || memoryPage)(body, toast);
  } catch (error) {
    failed(body, error);
  }
}
