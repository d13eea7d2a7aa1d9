// Chat commands typed in the message box: what /help lists (the gateway's /api/commands, the same
// table the chat router answers from) works here as in a chat, answered in the conversation as a
// note; the agent never sees them. A skill's /name goes on to the agent, which uses that skill.

import { call, settings } from "./api.js";
import { usageText } from "./account.js";
import { resumeOf, waitingIn } from "./approvals.js";
import { compactNow } from "./compact.js";
import { CLEAR_WORDS, goalCommand } from "./goal.js";
import { schedules as scheduleApi, describe } from "./schedules.js";

// As skills/slash.py reads a command: `/name` then a space, a newline or the end (`/tmp/x is` is none).
const SLASH = /^\/([A-Za-z0-9][A-Za-z0-9_-]{0,63})(?:@[A-Za-z0-9_]+)?(?=\s|$)([\s\S]*)$/;
const q = encodeURIComponent;
const NO_SCHEDULER = "Scheduling is not available right now (no scheduler is running).";
let table = null; // /api/commands, once

/** (name, what follows) when `text` is a slash command, else null. */
export function slashCommand(text) {
  const match = SLASH.exec(text.trim());
  return match ? [match[1].toLowerCase(), match[2].trim()] : null;
}

async function commandTable() {
  table = table || (await call("/commands"));
  return table;
}

const skillKey = (name) => name.toLowerCase().replaceAll("_", "-");

async function helpText() {
  const [{ intro, commands }, { skills }] = await Promise.all([commandTable(), call("/skills")]);
  const lines = [intro, ...commands.map((c) => `/${c.name} - ${c.about}`)];
  const enabled = skills.filter((s) => s.enabled);
  if (enabled.length) {
    lines.push("", "Skills (start a message with one to use it):");
    for (const skill of enabled) lines.push(`/${skill.name} - ${skill.description.split(". ")[0].replace(/\.$/, "")}`);
  }
  return lines.join("\n");
}

/**
 * `text` from the message box: a command is answered here (`page.note(command, answer)`). Returns
 * what to send on to the agent: `text` itself when it is no command or a skill, the objective of
 * `/goal <objective>`, or null when nothing is to be sent.
 */
export async function command(text, page) {
  const found = slashCommand(text);
  if (!found) return text;
  const [name, argument] = found;
  const say = (answer) => page.note(`/${name}${argument ? ` ${argument}` : ""}`, answer);
  const { commands } = await commandTable();
  if (!commands.some((c) => c.name === name)) return other(name, text, say);
  const usage = commands.find((c) => c.name === name).usage;
  if (usage && !argument) {
    say(usage); // asking how is no mistake: the usage, as usage
    return null;
  }
  switch (name) {
    case "help":
      say(await helpText());
      return null;
    case "new":
      page.newChat();
      return null;
    case "status":
      say(await status(page));
      return null;
    case "models":
      say(await models(page, argument));
      return null;
    case "memory":
      say(await memory());
      return null;
    case "goal": {
      // Only a goal being set needs the thread made (shown or cleared, a new chat has none).
      const setting = argument && !CLEAR_WORDS.has(argument.toLowerCase());
      const threadId = setting ? await page.ensureThread(argument) : page.threadId();
      return goalCommand(threadId, argument, say, page.running());
    }
    case "compact":
      say(await compact(page));
      return null;
    case "schedule":
      say(await schedule(page, argument));
      return null;
    case "schedules":
    case "unschedule":
      say(await listed(page, name, argument));
      return null;
    case "usage":
      say(await usageText());
      return null;
    case "connect":
      say("Here you are signed in already. To make a chat (Slack, Telegram, ...) you, send /connect there and enter the code it answers under Settings → Account.");
      return null;
    case "approve":
    case "deny":
      say(await answerApproval(page, name, argument));
      return null;
    default:
      say(`/${name} works in chats; not here yet.`);
      return null;
  }
}

/** A `/name` that is no command: a skill goes on to the agent, anything else is answered. */
async function other(name, text, say) {
  const { skills } = await call("/skills");
  const skill = skills.find((s) => skillKey(s.name) === skillKey(name));
  if (skill?.enabled) return text; // the runner activates it
  if (skill) say(`The skill /${skill.name} is switched off here; an administrator can enable it.`);
  else say(`There is no command or skill called /${name}.\n\n${await helpText()}`);
  return null;
}

/** `/approve <id> [always]` or `/deny <id> [reason]`: a tool call waiting for a yes, answered as the
 * approval card's buttons answer it (`page.resume`, LangGraph's resume); without an id, what waits. */
async function answerApproval(page, name, argument) {
  if (page.isNew()) return "Nothing waits for your approval here.";
  const waiting = waitingIn(await call(`/threads/${q(page.threadId())}/state`));
  const [id, ...words] = argument.split(/\s+/).filter(Boolean);
  if (!id) {
    if (!waiting.length) return "Nothing waits for your approval here.";
    return `Waiting for approval:\n${waiting.map((w) => `${w.approval_id}: ${w.description || w.tool}`).join("\n")}\nAnswer with /${name} <id>.`;
  }
  if (!waiting.some((w) => w.approval_id === id)) return `No approval ${id} waits here (it was answered already).`;
  const always = name === "approve" && words.length === 1 && words[0].toLowerCase() === "always";
  const resume = resumeOf(id, name === "deny" ? "deny" : always ? "always" : "approve", words.join(" "));
  if (!(await page.resume(resume))) return "I am still working on your last message; answer once I have stopped.";
  return name === "approve" ? `Approved ${id}: the call ran and the answer went on.` : `Denied ${id}: the agent was told.`;
}

async function status(page) {
  const model = page.model();
  const lines = [page.isNew() ? "A new conversation (nothing sent yet)." : `This conversation: ${page.title() || "untitled"} (thread ${page.threadId()}).`];
  lines.push(`Model: ${model ? `${model.display_name || model.name} (${model.name})` : "the default"}.`);
  lines.push(page.running() ? "I am working on your last message." : "I am not working on anything; send a message.");
  return lines.join("\n");
}

async function models(page, argument) {
  const { models: all } = await settings.models();
  if (!all.length) return "No models are configured (config.yaml, models:).";
  if (argument) {
    const wanted = argument.toLowerCase();
    const chosen = all.find((m) => m.name.toLowerCase() === wanted || (m.display_name || "").toLowerCase() === wanted);
    if (!chosen) return `There is no model called ${argument}. Models: ${all.map((m) => m.name).join(", ")}.`;
    page.chooseModel(chosen.name);
    return `Now using ${chosen.display_name || chosen.name} (${chosen.name}) here.`;
  }
  const current = page.model()?.name;
  const lines = all.map((m) => `${m.name === current ? "▸" : "-"} ${m.name}${m.display_name ? ` (${m.display_name})` : ""}${m.name === current ? " - in use" : ""}`);
  return `Models (/models <name> picks one):\n${lines.join("\n")}`;
}

async function memory() {
  const doc = await settings.memory();
  const summaries = ["workContext", "personalContext", "topOfMind"].map((key) => doc.user?.[key]?.summary).filter(Boolean);
  const facts = (doc.facts || []).map((f) => `- ${f.content}`);
  if (!summaries.length && !facts.length) return "I do not remember anything about you yet.";
  const shown = [...summaries, ...(facts.length ? ["Facts:", ...facts.slice(0, 20)] : [])];
  if (facts.length > 20) shown.push(`… and ${facts.length - 20} more`);
  return `What I remember about you:\n${shown.join("\n")}\n(Settings → Memory shows and edits all of it.)`;
}

async function compact(page) {
  if (page.isNew()) return "Nothing to compact: the conversation has not started.";
  if (page.running()) return "I am still working on your last message; send /compact once I have answered.";
  const done = await compactNow(page.threadId());
  if (done.compacted) await page.reload();
  return done.text;
}

function next(task) {
  if (task.status !== "enabled" || !task.next_run_at) return "";
  return ` (next ${new Date(task.next_run_at).toLocaleString([], { weekday: "short", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" })})`;
}

async function tasksHere(page) {
  if (page.isNew()) return [];
  const tasks = await call(`/threads/${q(page.threadId())}/scheduled-tasks`);
  return tasks.sort((a, b) => String(a.created_at).localeCompare(String(b.created_at)));
}

function failure(error, prefix) {
  return error.status === 503 ? NO_SCHEDULER : `${prefix}${error.message}`;
}

async function schedule(page, argument) {
  try {
    const threadId = await page.ensureThread(`/schedule ${argument}`);
    const task = await call("/scheduled-tasks/from-text", { method: "POST", json: { text: argument, thread_id: threadId } });
    const number = (await tasksHere(page)).findIndex((t) => t.id === task.id) + 1;
    return `Scheduled #${number}: ${describe(task)}: ${task.prompt}${next(task)}\nI will answer in this conversation. /schedules lists its tasks; /unschedule <number> removes one.`;
  } catch (error) {
    return failure(error, "I could not schedule that: ");
  }
}

async function listed(page, name, argument) {
  try {
    const tasks = await tasksHere(page);
    if (name === "schedules") {
      if (!tasks.length) return "This conversation has no scheduled tasks. Make one with /schedule <when> <what>.";
      return `Scheduled tasks here:\n${tasks.map((t, i) => `${i + 1}. ${describe(t)}${t.status === "paused" ? " [paused]" : ""}: ${t.prompt}${next(t)}`).join("\n")}`;
    }
    if (!tasks.length) return "This conversation has no scheduled tasks to remove.";
    const number = Number(argument);
    if (!/^\d+$/.test(argument) || number < 1 || number > tasks.length) {
      return `Which one? Write /unschedule <number>, a number from /schedules (1 to ${tasks.length}).`;
    }
    const task = tasks[number - 1];
    await scheduleApi.remove(task.id);
    return `Removed #${number}: ${describe(task)}: ${task.prompt}`;
  } catch (error) {
    return failure(error, "That did not work: ");
  }
}
