// DOM helpers. Every piece of data becomes a text node or a property;
// nothing here parses HTML.

export function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") e.addEventListener(k.slice(2), v);
    else if (k === "class") e.className = v;
    else if (k === "value" || k === "checked" || k === "disabled" || k === "selected") e[k] = v;
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  append(e, children);
  return e;
}

function append(e, children) {
  for (const c of children.flat(Infinity)) {
    if (c == null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(e, ...children) {
  e.replaceChildren();
  append(e, children);
  return e;
}

let uid = 0;
// field is a labelled control: the label names the input by id.
export function field(label, control, hint) {
  const id = control.id || (control.id = "f" + ++uid);
  return h("div", { class: "field" }, h("label", { for: id }, label), control, hint ? h("small", null, hint) : null);
}

// check is a labelled checkbox (the label after the box).
export function check(label, box) {
  const id = box.id || (box.id = "f" + ++uid);
  return h("div", { class: "field check" }, box, h("label", { for: id }, label));
}

export function select(options, value, attrs) {
  const s = h("select", attrs);
  for (const o of options) {
    const [v, text] = Array.isArray(o) ? o : [o, o];
    s.append(h("option", { value: v, selected: v === value }, text));
  }
  return s;
}

export function formatBytes(n) {
  if (n == null) return "";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let x = Number(n);
  while (x >= 1024 && i < u.length - 1) { x /= 1024; i++; }
  return (i ? x.toFixed(1) : String(x)) + " " + u[i];
}

const MAX_CELL = 120;

// cellText is a one-line, shortened rendering of an AttributeValue.
export function cellText(v) {
  const s = valueText(v);
  return s.length > MAX_CELL ? s.slice(0, MAX_CELL) + "…" : s;
}

export function valueText(v) {
  if (v == null || typeof v !== "object") return "";
  const [t, x] = Object.entries(v)[0] || [];
  switch (t) {
    case "S": return x;
    case "N": return x;
    case "B": return `<binary ${b64len(x)} bytes>`;
    case "BOOL": return String(x);
    case "NULL": return "null";
    case "SS": return "{" + x.map((s) => JSON.stringify(s)).join(", ") + "}";
    case "NS": return "{" + x.join(", ") + "}";
    case "BS": return `{${x.length} binary values}`;
    case "L": return "[" + x.map(valueText).join(", ") + "]";
    case "M": return "{" + Object.entries(x).map(([k, y]) => JSON.stringify(k) + ": " + valueText(y)).join(", ") + "}";
    default: return JSON.stringify(v);
  }
}

function b64len(s) {
  const pad = s.endsWith("==") ? 2 : s.endsWith("=") ? 1 : 0;
  return Math.floor((s.length * 3) / 4) - pad;
}

// plain converts DynamoDB JSON to plain JSON (numbers stay strings when
// a double would change them).
export function plain(v) {
  const [t, x] = Object.entries(v)[0] || [];
  switch (t) {
    case "S": case "B": case "BOOL": return x;
    case "N": { const n = Number(x); return String(n) === x ? n : x; }
    case "NULL": return null;
    case "SS": case "BS": return [...x];
    case "NS": return x.map((s) => plain({ N: s }));
    case "L": return x.map(plain);
    case "M": return Object.fromEntries(Object.entries(x).map(([k, y]) => [k, plain(y)]));
    default: return v;
  }
}
