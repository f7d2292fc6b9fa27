"""The local channel as a web page: its messages with their blocks and buttons, the private replies of the person
looking, and the form (modal) open for them. Rendered here from the sink's record; the page's script only posts what
the person does (a click, a form sent or cancelled) and polls for the channel's new state.

Slack's mrkdwn is rendered the way Slack shows it: `&lt;` `&gt;` `&amp;` as the characters, `<@U123>` as @name,
code blocks, inline code, *bold*; anything else that looks like markup is shown as text.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from wap_stack.slack_workspace import USERS

_EMOJI = {"warning": "\u26a0", "no_entry": "\u26d4", "rotating_light": "\u26a0", "white_check_mark": "\u2714",
          "x": "\u2716", "wastebasket": "\u2716", "repeat": "\u21bb", "arrows_counterclockwise": "\u21bb",
          "large_yellow_circle": "\u25cf", "broom": "\u2731"}
_CONTROL = re.compile(r"<([^<>\s][^<>]*)>")
_STRAY = re.compile(r"&(?!(?:amp|lt|gt);)")


def _inline(text: str) -> str:
    """One line-run of mrkdwn (no code block) as HTML: entities kept, control sequences shown as Slack shows them."""
    out, at = [], 0
    for match in _CONTROL.finditer(text):
        out.append(_safe(text[at:match.start()]))
        inner = match.group(1)
        if inner.startswith("@"):
            out.append(f'<span class="mention">@{html.escape(USERS.get(inner[1:], inner[1:]))}</span>')
        elif inner.startswith("!"):
            out.append(f'<span class="mention">@{html.escape(inner[1:].split("|")[0])}</span>')
        elif inner.startswith(("http://", "https://")):
            url, _, label = inner.partition("|")
            out.append(f'<a href="{_safe(url)}">{_safe(label or url)}</a>')
        else:
            out.append(_safe(match.group(0)))
        at = match.end()
    out.append(_safe(text[at:]))
    joined = "".join(out)
    joined = re.sub(r"`([^`]+)`", r"<code>\1</code>", joined)
    joined = re.sub(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])", r"<b>\1</b>", joined)
    return _emoji(joined).replace("\n", "<br>")


def _emoji(text: str) -> str:
    return re.sub(r":([a-z_]+):", lambda m: _EMOJI.get(m.group(1), m.group(0)), text)


def _safe(text: str) -> str:
    """Text as HTML: Slack's three entities are HTML's too; any raw `<`, `>` or `&` is escaped."""
    return _STRAY.sub("&amp;", text).replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


_CODE_BLOCK = re.compile(r"```(.*?)```(?!`)", re.S)  # the closing fence: the last three of a run of backticks


def mrkdwn(text: str) -> str:
    out, at = [], 0
    for match in _CODE_BLOCK.finditer(text):
        out += [_inline(text[at:match.start()]), f"<pre>{_safe(match.group(1).strip(chr(10)))}</pre>"]
        at = match.end()
    return "".join([*out, _inline(text[at:])])


def _text(obj: Any) -> str:
    if not isinstance(obj, Mapping):
        return ""
    text = str(obj.get("text", ""))
    return mrkdwn(text) if obj.get("type") == "mrkdwn" else _emoji(_safe(text))


def _button(element: Mapping[str, Any], ts: str) -> str:
    confirm = element.get("confirm")
    data = {"ts": ts, "action": element.get("action_id"),
            "confirm": None if not isinstance(confirm, Mapping) else {
                k: str((confirm.get(k) or {}).get("text", "")) for k in ("title", "text", "confirm", "deny")}}
    style = str(element.get("style") or "default")
    return (f'<button class="btn {html.escape(style)}" data-click="{html.escape(json.dumps(data))}">'
            f'{_text(element.get("text"))}</button>')


def blocks_html(blocks: Sequence[Mapping[str, Any]], ts: str) -> str:
    out = []
    for block in blocks:
        kind = block.get("type")
        if kind == "header":
            out.append(f'<div class="header">{_text(block.get("text"))}</div>')
        elif kind == "section":
            if block.get("text"):
                out.append(f'<div class="section">{_text(block["text"])}</div>')
            if block.get("fields"):
                out.append('<div class="fields">' + "".join(f"<div>{_text(f)}</div>" for f in block["fields"])
                           + "</div>")
        elif kind == "context":
            out.append('<div class="context">' + " ".join(_text(e) for e in block.get("elements", [])) + "</div>")
        elif kind == "actions":
            out.append('<div class="actions">' + "".join(_button(e, ts) for e in block.get("elements", [])
                                                         if e.get("type") == "button") + "</div>")
        elif kind == "input":
            element = block.get("element") or {}
            out.append(f'<label class="input">{_text(block.get("label"))}<textarea name="reason" '
                       f'minlength="{int(element.get("min_length") or 0)}" '
                       f'maxlength="{int(element.get("max_length") or 3000)}" placeholder="'
                       f'{html.escape(str((element.get("placeholder") or {}).get("text", "")))}"></textarea>'
                       f'<span class="error"></span></label>')
        elif kind == "divider":
            out.append("<hr>")
    return "".join(out)


def channel_html(messages: Sequence[Mapping[str, Any]], ephemerals: Sequence[Mapping[str, Any]]) -> str:
    entries = sorted([(str(m["ts"]), False, m) for m in messages] + [(str(e["ts"]), True, e) for e in ephemerals],
                     key=lambda item: float(item[0]))
    out = []
    for ts, private, message in entries:
        body = blocks_html(message.get("blocks") or [], ts) if message.get("blocks") else mrkdwn(
            str(message.get("text", "")))
        note = '<div class="only-you">Only visible to you</div>' if private else ""
        edited = ' <span class="edited">(edited)</span>' if message.get("edited") else ""
        out.append(f'<div class="message{" private" if private else ""}" data-ts="{html.escape(ts)}">'
                   f'<div class="from">wap-lake <span class="app">APP</span>{edited}</div>{note}{body}</div>')
    return "".join(out) or '<p class="empty">No messages yet: drop a file into the source bucket.</p>'


def modal_html(view: Mapping[str, Any] | None) -> str:
    if not view:
        return ""
    return (f'<div class="overlay"><form class="modal" data-view="{html.escape(str(view.get("id")))}">'
            f'<h2>{_safe(str((view.get("title") or {}).get("text", "")))}</h2>'
            f'{blocks_html(view.get("blocks") or [], "")}<p class="error" id="modal-error"></p>'
            f'<div class="buttons"><button type="button" class="btn default" id="cancel">'
            f'{_safe(str((view.get("close") or {}).get("text", "Cancel")))}</button>'
            f'<button type="submit" class="btn primary" id="submit">'
            f'{_safe(str((view.get("submit") or {}).get("text", "Submit")))}</button></div></form></div>')


def page(channel: str, user: str) -> str:
    people = "".join(f'<option value="{u}"{" selected" if u == user else ""}>{n} ({u})</option>'
                     for u, n in USERS.items())
    return _PAGE.replace("{{CHANNEL}}", html.escape(channel)).replace("{{PEOPLE}}", people).replace(
        "{{USER}}", html.escape(user))


_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>{{CHANNEL}} (local Slack)</title><style>
body{font-family:'DejaVu Sans',Arial,sans-serif;line-height:1.5;margin:0;background:#f8f8f8;color:#1d1c1d;
font-size:14px}
.top{background:#3f0e40;color:#fff;padding:10px 18px;display:flex;justify-content:space-between;align-items:center}
.top h1{font-size:17px;margin:0}#channel{max-width:1100px;margin:12px auto;padding:0 12px}
.message{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px 14px;margin:10px 0}
.message.private{background:#f4f7fb;border-style:dashed}.from{font-weight:bold;margin-bottom:4px}
.app{font-size:10px;background:#ddd;border-radius:3px;padding:1px 3px;color:#555}.edited{color:#888;font-weight:normal}
.only-you{color:#777;font-size:12px}.header{font-size:16px;font-weight:bold;margin:4px 0}.section{margin:6px 0}
.fields{display:grid;grid-template-columns:1fr 1fr;gap:6px;margin:6px 0}.context{color:#555;margin:8px 0;
border-left:3px solid #2eb67d;padding-left:8px}pre{background:#f4f4f4;border:1px solid #e0e0e0;padding:6px;
white-space:pre-wrap;font-size:12px;margin:4px 0}code{background:#f4f4f4;color:#c0392b;padding:0 2px}
.mention{background:#e8f5fa;color:#1264a3;padding:0 2px}.actions{margin-top:8px}
.btn{border:1px solid #bbb;border-radius:4px;padding:6px 12px;margin-right:6px;background:#fff;cursor:pointer;
font-weight:bold}.btn.primary{background:#007a5a;color:#fff;border-color:#007a5a}.btn.danger{color:#e01e5a;
border-color:#e01e5a}.overlay{position:fixed;inset:0;background:rgba(0,0,0,.45);display:flex;align-items:center;
justify-content:center}.modal{background:#fff;border-radius:8px;padding:18px;width:520px}.modal h2{margin-top:0}
textarea{width:100%;height:70px;display:block;margin-top:6px}.error{color:#e01e5a}.buttons{text-align:right;
margin-top:10px}#notice{max-width:1100px;margin:8px auto;color:#e01e5a;font-weight:bold}
</style></head><body><div class="top"><h1>#{{CHANNEL}} <small>(local Slack: the stack's sink)</small></h1>
<label>You are <select id="user">{{PEOPLE}}</select></label></div><div id="notice"></div><div id="channel"></div>
<div id="modal"></div><script>
const user = "{{USER}}"; let shownView = null, lastChannel = "";
document.getElementById("user").onchange = e => { location.search = "?user=" + e.target.value; };
async function post(path, body) {
  const r = await fetch(path, {method: "POST", headers: {"Content-Type": "application/json"},
                               body: JSON.stringify(Object.assign({user}, body))});
  return r.json();
}
function notice(text) { document.getElementById("notice").textContent = text || ""; }
function confirmFirst(c) {
  return new Promise(resolve => {
    if (!c) return resolve(true);
    const box = document.getElementById("modal");
    box.innerHTML = '<div class="overlay"><div class="modal"><h2></h2><p></p><div class="buttons">' +
      '<button class="btn default" id="deny"></button><button class="btn primary" id="yes"></button></div></div></div>';
    box.querySelector("h2").textContent = c.title; box.querySelector("p").textContent = c.text;
    box.querySelector("#deny").textContent = c.deny; box.querySelector("#yes").textContent = c.confirm;
    box.querySelector("#deny").onclick = () => { box.innerHTML = ""; resolve(false); };
    box.querySelector("#yes").onclick = () => { box.innerHTML = ""; resolve(true); };
  });
}
document.addEventListener("click", async e => {
  const b = e.target.closest("button[data-click]"); if (!b) return;
  const d = JSON.parse(b.dataset.click); if (!(await confirmFirst(d.confirm))) return;
  notice(""); const r = await post("/ui/click", {ts: d.ts, action_id: d.action});
  if (r.status !== 200) notice("The app did not accept the click (" + r.status + "): " + r.body);
  refresh();
});
function bindModal() {
  const form = document.querySelector("form.modal"); if (!form) return;
  form.querySelector("#cancel").onclick = async () => { await post("/ui/close", {}); refresh(); };
  form.onsubmit = async ev => {
    ev.preventDefault(); const reason = form.querySelector("textarea").value;
    const r = await post("/ui/submit", {reason});
    if (r.errors) { form.querySelector(".error").textContent = Object.values(r.errors).join(" "); return; }
    if (r.status !== 200) { document.getElementById("modal-error").textContent = r.status + ": " + r.body; return; }
    refresh();
  };
}
async function refresh() {
  const s = await (await fetch("/ui/state?user=" + user)).json();
  if (s.channel !== lastChannel) { document.getElementById("channel").innerHTML = s.channel; lastChannel = s.channel; }
  if (s.view_id !== shownView) { document.getElementById("modal").innerHTML = s.modal; shownView = s.view_id;
                                 bindModal(); }
}
refresh(); setInterval(refresh, 700);
</script></body></html>"""
