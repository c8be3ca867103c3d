// The console: hash routes over the DynamoDB API (api.js). Data is only
// ever rendered as text (dom.js).
import { Client, PLACEHOLDER, AUTH_ERRORS, loadCredentials, saveCredentials, clearCredentials } from "./api.js";
import { h, clear, field, check, select, formatBytes, cellText, plain } from "./dom.js";
import { parseMetrics, quantile } from "./metrics.js";
import { addSample, progress, duration } from "./jobs.js";

const main = document.getElementById("main");
const statusEl = document.getElementById("status");
let client = null;

function status(msg, kind) {
  clear(statusEl, msg ? h("p", { class: kind || "info" }, msg) : null);
}

function errorBox(e) {
  return h("p", { class: "error", role: "alert" }, String(e && e.message ? e.message : e));
}

// guard runs fn, showing an API error instead of throwing it.
async function guard(fn, into) {
  try {
    return await fn();
  } catch (e) {
    if (AUTH_ERRORS.has(e.type) && !client.creds.placeholder) {
      status("");
    }
    if (into) into.append(errorBox(e));
    else status(e.message, "error");
    return undefined;
  }
}

// ---------- sign-in ----------

async function probe(creds) {
  const c = new Client(creds);
  await c.call("ListTables", { Limit: 1 });
  return c;
}

async function start() {
  const saved = loadCredentials();
  try {
    client = await probe(saved || PLACEHOLDER);
  } catch (e) {
    if (!AUTH_ERRORS.has(e.type)) {
      clear(main, h("h1", null, "extenddb"), errorBox(e));
      return;
    }
    if (saved) clearCredentials();
    signIn(saved ? "The saved key was refused: " + e.message : "");
    return;
  }
  showWho();
  window.addEventListener("hashchange", route);
  route();
}

function showWho() {
  document.querySelector("header nav").hidden = false;
  const who = document.getElementById("who");
  const out = document.getElementById("signout");
  if (client.creds.placeholder) {
    clear(who, "open (no access keys configured)");
    out.hidden = true;
  } else {
    clear(who, "key ", h("code", null, client.creds.accessKeyId));
    out.hidden = false;
    out.onclick = () => { clearCredentials(); location.hash = ""; location.reload(); };
  }
}

function signIn(message) {
  document.querySelector("header nav").hidden = true; // nothing to reach before signing in
  const id = h("input", { name: "accessKeyId", autocomplete: "username", required: true, spellcheck: "false" });
  const secret = h("input", { name: "secretAccessKey", type: "password", autocomplete: "current-password", required: true });
  const msg = h("div", { id: "signin-msg" }, message ? errorBox(message) : null);
  const form = h("form", { class: "card narrow", id: "signin" },
    h("h1", null, "Sign in"),
    h("p", null, "This server requires signed requests. Sign in with an access key of its ",
      h("code", null, "auth.keys"), ". The key is kept in this tab's session storage only, and every request is signed with it in the page."),
    field("Access key id", id), field("Secret access key", secret),
    h("button", { type: "submit", class: "primary" }, "Sign in"), msg);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clear(msg);
    const creds = { accessKeyId: id.value.trim(), secretAccessKey: secret.value };
    try {
      client = await probe(creds);
    } catch (e) {
      secret.value = "";
      msg.append(errorBox(AUTH_ERRORS.has(e.type) ? "Sign-in refused: " + e.message : e));
      return;
    }
    saveCredentials(creds);
    showWho();
    window.addEventListener("hashchange", route);
    if (!location.hash || location.hash === "#") location.hash = "#/tables";
    else route();
  });
  clear(main, form);
  id.focus();
}

// ---------- routing ----------

function route() {
  const parts = (location.hash || "#/tables").slice(2).split("/").map(decodeURIComponent);
  const name = parts[0] || "tables";
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.route === name) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  status("");
  const views = { tables: tablesView, table: tableView, items: itemsView, partiql: partiqlView, backups: backupsView, plans: plansView, exports: exportsView, imports: importsView, server: serverView };
  (views[name] || tablesView)(parts.slice(1));
  main.focus({ preventScroll: true });
}

function link(href, text) {
  return h("a", { href }, text);
}

// ---------- tables ----------

function keySchemaText(ks, defs) {
  const type = (n) => (defs || []).find((d) => d.AttributeName === n)?.AttributeType || "";
  return (ks || []).map((k) => `${k.AttributeName} (${k.KeyType === "HASH" ? "partition" : "sort"}, ${type(k.AttributeName)})`).join(", ");
}

function tablesView() {
  const body = h("tbody");
  const more = h("div", { class: "pager" });
  const out = h("div");
  clear(main,
    h("div", { class: "titlebar" }, h("h1", null, "Tables"),
      h("button", { type: "button", class: "primary", id: "new-table", onclick: () => { form.hidden = !form.hidden; if (!form.hidden) form.querySelector("input").focus(); } }, "Create table")),
    createTableForm(), out,
    h("div", { class: "scroll" }, h("table", { class: "grid", id: "tables" },
      h("thead", null, h("tr", null, ["Name", "Status", "Items", "Size", "Keys", "Indexes", "Stream", "TTL", "PITR", ""].map((t) => h("th", { scope: "col" }, t)))),
      body)),
    more);
  const form = main.querySelector("#create-table");
  const queue = [];
  let running = 0;
  // A row is described when it scrolls into view (three calls a row: a
  // page of 100 rows costs only what the reader sees), six at a time (the
  // browser's connections per host).
  const jobs = new Map();
  const seen = new IntersectionObserver((entries) => {
    for (const e of entries) {
      if (!e.isIntersecting || !jobs.has(e.target)) continue;
      queue.push(jobs.get(e.target));
      jobs.delete(e.target);
      seen.unobserve(e.target);
    }
    pump();
  }, { rootMargin: "200px" });
  const pump = () => {
    while (running < 6 && queue.length) {
      const job = queue.shift();
      running++;
      job().finally(() => { running--; pump(); });
    }
  };
  async function page(start) {
    const r = await guard(() => client.call("ListTables", start ? { Limit: 100, ExclusiveStartTableName: start } : { Limit: 100 }), out);
    if (!r) return;
    if (!start && !r.TableNames.length) body.append(h("tr", null, h("td", { colspan: 10 }, "No tables yet.")));
    for (const name of r.TableNames) {
      const cells = ["", "", "", "", "", "", "", ""].map(() => h("td", null, "…"));
      const row = h("tr", { "data-table": name },
        h("th", { scope: "row" }, link("#/items/" + encodeURIComponent(name), name)), cells,
        h("td", { class: "actions" }, link("#/table/" + encodeURIComponent(name), "Manage"), " ",
          h("button", { type: "button", class: "danger small", onclick: () => confirmDelete(name, row) }, "Delete")));
      body.append(row);
      seen.observe(row);
      jobs.set(row, async () => {
        try {
          const t = (await client.call("DescribeTable", { TableName: name })).Table;
          const idx = [...(t.GlobalSecondaryIndexes || []).map((i) => `${i.IndexName} (GSI${i.IndexStatus && i.IndexStatus !== "ACTIVE" ? ", " + i.IndexStatus : ""})`),
            ...(t.LocalSecondaryIndexes || []).map((i) => `${i.IndexName} (LSI)`)];
          const stream = t.StreamSpecification?.StreamEnabled ? t.StreamSpecification.StreamViewType : "off";
          [t.TableStatus, String(t.ItemCount ?? ""), formatBytes(t.TableSizeBytes), keySchemaText(t.KeySchema, t.AttributeDefinitions),
            idx.join(", ") || "none", stream].forEach((v, i) => clear(cells[i], v));
          const [ttl, cb] = await Promise.all([
            client.call("DescribeTimeToLive", { TableName: name }).catch((e) => ({ error: e })),
            client.call("DescribeContinuousBackups", { TableName: name }).catch((e) => ({ error: e }))]);
          const td = ttl.TimeToLiveDescription;
          clear(cells[6], ttl.error ? "?" : td?.TimeToLiveStatus === "ENABLED" ? td.AttributeName : (td?.TimeToLiveStatus || "DISABLED").toLowerCase());
          const p = cb.ContinuousBackupsDescription?.PointInTimeRecoveryDescription;
          clear(cells[7], cb.error ? "?" : (p?.PointInTimeRecoveryStatus || "DISABLED").toLowerCase());
        } catch (e) {
          clear(cells[0], h("span", { class: "error" }, e.type || "error"));
        }
      });
    }
    pump();
    clear(more, r.LastEvaluatedTableName
      ? h("button", { type: "button", onclick: () => page(r.LastEvaluatedTableName) }, "More tables") : null);
  }
  page();
}

function confirmDelete(name, row) {
  const input = h("input", { spellcheck: "false", autocomplete: "off" });
  const go = h("button", { type: "submit", class: "danger", disabled: true }, "Delete table");
  const msg = h("div");
  input.addEventListener("input", () => { go.disabled = input.value !== name; });
  const f = h("form", { class: "confirm", role: "dialog", "aria-label": "Delete table" },
    h("p", null, "Deleting ", h("strong", null, name), " removes all of its items and indexes. Type the table name to confirm."),
    field("Table name", input), go,
    h("button", { type: "button", onclick: () => tr.remove() }, "Cancel"), msg);
  f.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (input.value !== name) return;
    const r = await guard(() => client.call("DeleteTable", { TableName: name }), msg);
    if (r) { status(`Table ${name} is being deleted.`); tr.remove(); row.remove(); }
  });
  const tr = h("tr", { class: "confirm-row" }, h("td", { colspan: 10 }, f));
  row.after(tr);
  input.focus();
}

const KEY_TYPES = [["S", "String"], ["N", "Number"], ["B", "Binary"]];

// projectionField is an index's projection: all attributes, keys only, or
// keys and the listed attributes.
function projectionField(kind) {
  const type = select([["ALL", "All attributes"], ["KEYS_ONLY", "Keys only"], ["INCLUDE", "Keys and listed attributes"]], "ALL", { name: kind + "Projection" });
  const attrs = h("input", { name: kind + "NonKey", spellcheck: "false", placeholder: "a, b" });
  const attrsField = field("Projected attributes", attrs, "comma-separated");
  attrsField.hidden = true;
  type.addEventListener("change", () => { attrsField.hidden = type.value !== "INCLUDE"; });
  return { el: [field("Projection", type), attrsField], value: () => type.value === "INCLUDE"
    ? { ProjectionType: "INCLUDE", NonKeyAttributes: attrs.value.split(",").map((x) => x.trim()).filter(Boolean) } : { ProjectionType: type.value } };
}

// gsiEditor is the global secondary index blocks of a new table's form
// (one to start with, more on "Add global index"). value(def, throughput)
// is the GlobalSecondaryIndexes member (undefined when none is named):
// def records an attribute's type, throughput is given to each index
// when the table is provisioned.
function gsiEditor() {
  const gsis = [];
  const list = h("div");
  const add = () => {
    const b = { name: h("input", { name: "gsi", spellcheck: "false" }), pk: h("input", { name: "gsiPk", spellcheck: "false" }),
      pkType: select(KEY_TYPES, "S", { name: "gsiPkType" }), sk: h("input", { name: "gsiSk", spellcheck: "false" }),
      skType: select(KEY_TYPES, "S", { name: "gsiSkType" }), proj: projectionField("gsi") };
    gsis.push(b);
    list.append(h("fieldset", { class: "index" }, h("legend", null, `Global secondary index ${gsis.length} (optional)`),
      field("Index name", b.name),
      h("div", { class: "row" }, field("Partition key", b.pk), field("Type", b.pkType)),
      h("div", { class: "row" }, field("Sort key (optional)", b.sk), field("Type", b.skType)),
      h("div", { class: "row" }, b.proj.el)));
    return b;
  };
  add();
  return {
    el: [list, h("button", { type: "button", onclick: () => add().name.focus() }, "Add global index")],
    value(def, throughput) {
      const out = [];
      // A block without a name is left out.
      for (const b of gsis.filter((b) => b.name.value.trim())) {
        if (!b.pk.value) throw new Error(`the index ${b.name.value} needs a partition key`);
        const ks = [{ AttributeName: b.pk.value, KeyType: "HASH" }];
        def(b.pk.value, b.pkType.value);
        if (b.sk.value) { ks.push({ AttributeName: b.sk.value, KeyType: "RANGE" }); def(b.sk.value, b.skType.value); }
        const g = { IndexName: b.name.value.trim(), KeySchema: ks, Projection: b.proj.value() };
        if (throughput) g.ProvisionedThroughput = throughput;
        out.push(g);
      }
      return out.length ? out : undefined;
    },
  };
}

// billingEditor is a new table's billing mode, with the capacities shown
// when provisioned. value() is {BillingMode, ProvisionedThroughput?};
// throughput() the capacity when provisioned, else undefined.
function billingEditor() {
  const billing = select([["PAY_PER_REQUEST", "On demand"], ["PROVISIONED", "Provisioned"]], "PAY_PER_REQUEST", { name: "billing" });
  const rcu = h("input", { name: "rcu", type: "number", min: "1", value: "5" });
  const wcu = h("input", { name: "wcu", type: "number", min: "1", value: "5" });
  const prov = h("div", { class: "row", hidden: true }, field("Read capacity units", rcu), field("Write capacity units", wcu));
  billing.addEventListener("change", () => { prov.hidden = billing.value !== "PROVISIONED"; });
  const throughput = () => billing.value === "PROVISIONED" ? { ReadCapacityUnits: Number(rcu.value), WriteCapacityUnits: Number(wcu.value) } : undefined;
  return {
    field: field("Billing mode", billing), prov, throughput,
    value: () => (throughput() ? { BillingMode: billing.value, ProvisionedThroughput: throughput() } : { BillingMode: billing.value }),
  };
}

// sseEditor is a table's encryption: the AWS owned key, the AWS managed
// KMS key or a customer managed key by id (and, for a restore, "as the
// source"). value() is the SSESpecification, undefined for the default.
function sseEditor(asSource, hint) {
  const options = [["OWNED", "AWS owned key"], ["KMS", "AWS managed KMS key"], ["CMK", "Customer managed KMS key"]];
  const sse = select(asSource ? [["", "As the source"], ...options] : options, asSource ? "" : "OWNED", { name: "SSESpecification" });
  const kmsKey = h("input", { name: "KMSMasterKeyId", spellcheck: "false", placeholder: "key id, ARN or alias" });
  const kmsField = field("KMS key", kmsKey);
  kmsField.hidden = true;
  sse.addEventListener("change", () => { kmsField.hidden = sse.value !== "CMK"; });
  return {
    el: h("div", { class: "row" }, field("Encryption", sse, hint), kmsField),
    value() {
      if (sse.value === "OWNED") return asSource ? { Enabled: false } : undefined;
      if (sse.value === "KMS") return { Enabled: true, SSEType: "KMS" };
      if (sse.value === "CMK") return { Enabled: true, SSEType: "KMS", KMSMasterKeyId: kmsKey.value.trim() };
      return undefined;
    },
  };
}

// attributeTypes collects a new table's AttributeDefinitions: def(name,
// type) refuses one attribute given two types; list() is the member.
function attributeTypes() {
  const defs = new Map();
  return {
    def(n, t) {
      if (defs.has(n) && defs.get(n) !== t) throw new Error(`attribute ${n} is given two types`);
      defs.set(n, t);
    },
    list: () => [...defs].map(([n, t]) => ({ AttributeName: n, AttributeType: t })),
  };
}

function createTableForm() {
  const types = KEY_TYPES;
  const name = h("input", { name: "TableName", required: true, pattern: "[a-zA-Z0-9_.\\-]{3,255}", spellcheck: "false" });
  const pk = h("input", { name: "pk", required: true, spellcheck: "false" });
  const pkType = select(types, "S", { name: "pkType" });
  const sk = h("input", { name: "sk", spellcheck: "false" });
  const skType = select(types, "S", { name: "skType" });
  const bill = billingEditor();
  const gsi = gsiEditor();
  // Local index blocks: one to start with, more on request.
  const lsis = [];
  const lsiList = h("div");
  const addLsi = () => {
    const b = { name: h("input", { name: "lsi", spellcheck: "false" }), sk: h("input", { name: "lsiSk", spellcheck: "false" }),
      skType: select(types, "S", { name: "lsiSkType" }), proj: projectionField("lsi") };
    lsis.push(b);
    lsiList.append(h("fieldset", { class: "index" }, h("legend", null, `Local secondary index ${lsis.length} (optional; needs the table's sort key)`),
      h("div", { class: "row" }, field("LSI name", b.name), field("LSI sort key", b.sk), field("Type", b.skType)),
      h("div", { class: "row" }, b.proj.el)));
    return b;
  };
  addLsi();
  const ttl = h("input", { name: "ttl", spellcheck: "false" });
  const pitr = h("input", { type: "checkbox", name: "pitr" });
  const stream = select([["", "Off"], ["NEW_AND_OLD_IMAGES", "New and old images"], ["NEW_IMAGE", "New image"], ["OLD_IMAGE", "Old image"], ["KEYS_ONLY", "Keys only"]], "", { name: "stream" });
  const msg = h("div");
  const f = h("form", { class: "card", id: "create-table", hidden: true },
    h("h2", null, "Create table"),
    field("Table name", name, "3–255 of a–z A–Z 0–9 _ . -"),
    h("fieldset", null, h("legend", null, "Primary key"),
      h("div", { class: "row" }, field("Partition key", pk), field("Type", pkType)),
      h("div", { class: "row" }, field("Sort key (optional)", sk), field("Type", skType))),
    gsi.el,
    lsiList,
    h("button", { type: "button", onclick: () => addLsi().name.focus() }, "Add local index"),
    h("div", { class: "row" }, bill.field, field("Stream", stream),
      field("TTL attribute (optional)", ttl, "epoch seconds; expired items are deleted"),
      h("div", { class: "field check" }, pitr, h("label", { for: pitr.id = "pitr" }, "Point-in-time recovery"))), bill.prov,
    h("button", { type: "submit", class: "primary" }, "Create"), msg);
  f.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clear(msg);
    const types = attributeTypes();
    const def = types.def;
    const input = { TableName: name.value.trim(), ...bill.value() };
    try {
      input.KeySchema = [{ AttributeName: pk.value, KeyType: "HASH" }];
      def(pk.value, pkType.value);
      if (sk.value) { input.KeySchema.push({ AttributeName: sk.value, KeyType: "RANGE" }); def(sk.value, skType.value); }
      const g = gsi.value(def, bill.throughput());
      if (g) input.GlobalSecondaryIndexes = g;
      for (const b of lsis.filter((b) => b.name.value.trim())) {
        if (!b.sk.value || !sk.value) throw new Error(`the local index ${b.name.value} needs its own sort key and the table's sort key`);
        def(b.sk.value, b.skType.value);
        (input.LocalSecondaryIndexes ||= []).push({ IndexName: b.name.value.trim(), Projection: b.proj.value(),
          KeySchema: [{ AttributeName: pk.value, KeyType: "HASH" }, { AttributeName: b.sk.value, KeyType: "RANGE" }] });
      }
      if (stream.value) input.StreamSpecification = { StreamEnabled: true, StreamViewType: stream.value };
      input.AttributeDefinitions = types.list();
    } catch (e) {
      msg.append(errorBox(e));
      return;
    }
    const r = await guard(() => client.call("CreateTable", input), msg);
    if (!r) return;
    // TTL and point-in-time recovery are set on the created table; a
    // refusal is reported with the table kept.
    const later = [];
    if (ttl.value.trim()) {
      later.push(["TTL", () => client.call("UpdateTimeToLive", { TableName: input.TableName,
        TimeToLiveSpecification: { Enabled: true, AttributeName: ttl.value.trim() } })]);
    }
    if (pitr.checked) {
      later.push(["point-in-time recovery", () => client.call("UpdateContinuousBackups", { TableName: input.TableName,
        PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true } })]);
    }
    const failed = [];
    for (const [what, fn] of later) {
      try { await fn(); } catch (e) { failed.push(`${what} not enabled: ${e.message}`); }
    }
    tablesView();
    status([`Table ${input.TableName} created (${r.TableDescription.TableStatus}).`, ...failed].join(" "), failed.length ? "error" : "info");
  });
  return f;
}

// ---------- one table: point-in-time recovery, restore, tags ----------

function utc(seconds) {
  return seconds == null ? "" : new Date(seconds * 1000).toISOString();
}

function tableView(args) {
  const name = args[0];
  if (!name) { location.hash = "#/tables"; return; }
  const out = h("div");
  clear(main, h("div", { class: "titlebar" }, h("h1", null, "Table: ", h("span", { class: "name" }, name)),
    h("span", null, link("#/items/" + encodeURIComponent(name), "Items"), " · ", link("#/tables", "All tables"))), out);
  guard(async () => {
    const t = await describe(name);
    const pitr = h("section", { class: "card", id: "pitr" });
    const restore = h("section", { class: "card", id: "pitr-restore", hidden: true });
    const tags = h("section", { class: "card", id: "tags" });
    main.append(pitr, restore, tags);
    await Promise.all([pitrSection(t, pitr, restore), tagsSection(t, tags)]);
  }, out);
}

// pitrSection shows the table's point-in-time recovery (status, period,
// restorable window), enables, updates or disables it, and fills restore
// with the restore-to-an-instant form while it is enabled.
async function pitrSection(t, box, restore) {
  clear(box, h("h2", null, "Point-in-time recovery"));
  const cb = await guard(() => client.call("DescribeContinuousBackups", { TableName: t.TableName }), box);
  if (!cb) return;
  const p = cb.ContinuousBackupsDescription?.PointInTimeRecoveryDescription || {};
  const on = p.PointInTimeRecoveryStatus === "ENABLED";
  const facts = h("dl", { class: "facts", id: "pitr-facts" });
  const fact = (k, v) => facts.append(h("dt", null, k), h("dd", null, v));
  fact("Status", p.PointInTimeRecoveryStatus || "DISABLED");
  if (on) {
    fact("Recovery period", `${p.RecoveryPeriodInDays ?? 35} days`);
    fact("Earliest restorable", utc(p.EarliestRestorableDateTime));
    fact("Latest restorable", utc(p.LatestRestorableDateTime));
  }
  const days = h("input", { type: "number", name: "RecoveryPeriodInDays", min: "1", max: "35", value: String(p.RecoveryPeriodInDays ?? 35) });
  const msg = h("div");
  const set = async (enable) => {
    clear(msg);
    const spec = { PointInTimeRecoveryEnabled: enable };
    if (enable) spec.RecoveryPeriodInDays = Number(days.value);
    const r = await guard(() => client.call("UpdateContinuousBackups", { TableName: t.TableName, PointInTimeRecoverySpecification: spec }), msg);
    if (!r) return;
    status(`Point-in-time recovery ${enable ? "enabled" : "disabled"} on ${t.TableName}.`);
    pitrSection(t, box, restore);
  };
  const f = h("form", { id: "pitr-form", class: "row" }, field("Recovery period (days)", days, "1–35"),
    h("div", { class: "buttons" }, h("button", { type: "submit", class: "primary" }, on ? "Update period" : "Enable"),
      on ? h("button", { type: "button", class: "danger", onclick: () => set(false) }, "Disable") : null));
  f.addEventListener("submit", (ev) => { ev.preventDefault(); set(true); });
  box.append(facts, f, msg);
  restore.hidden = !on;
  if (on) pitrRestoreForm(t, p, restore);
}

// tagsSection lists the table's tags (ListTagsOfResource, every page),
// adds or changes one (TagResource) and removes one (UntagResource).
async function tagsSection(t, box) {
  clear(box, h("h2", null, "Tags"));
  const tags = [];
  let token;
  do {
    const r = await guard(() => client.call("ListTagsOfResource", token ? { ResourceArn: t.TableArn, NextToken: token } : { ResourceArn: t.TableArn }), box);
    if (!r) return;
    tags.push(...(r.Tags || []));
    token = r.NextToken;
  } while (token);
  const msg = h("div");
  const again = () => tagsSection(t, box);
  const body = h("tbody", null, tags.length ? tags.map((tag) => h("tr", null, h("th", { scope: "row" }, tag.Key), h("td", null, tag.Value),
    h("td", null, h("button", { type: "button", class: "danger small", "aria-label": "Remove tag " + tag.Key, onclick: async () => {
      const r = await guard(() => client.call("UntagResource", { ResourceArn: t.TableArn, TagKeys: [tag.Key] }), msg);
      if (r) { status(`Tag ${tag.Key} removed.`); again(); }
    } }, "Remove")))) : h("tr", null, h("td", { colspan: 3 }, "No tags.")));
  const key = h("input", { name: "tagKey", required: true, spellcheck: "false", maxlength: "128" });
  const value = h("input", { name: "tagValue", spellcheck: "false", maxlength: "256" });
  const f = h("form", { id: "tag-form", class: "row" }, field("Tag key", key), field("Tag value", value),
    h("button", { type: "submit", class: "primary" }, "Add tag"));
  f.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clear(msg);
    const r = await guard(() => client.call("TagResource", { ResourceArn: t.TableArn, Tags: [{ Key: key.value, Value: value.value }] }), msg);
    if (r) { status(`Tag ${key.value} set.`); again(); }
  });
  box.append(h("div", { class: "scroll" }, h("table", { class: "grid", id: "tag-list" },
    h("thead", null, h("tr", null, ["Key", "Value", ""].map((x) => h("th", { scope: "col" }, x)))), body)), f, msg);
}

// pitrRestoreForm restores the table as it was at a chosen instant of its
// window, or at the latest restorable time, into a new table.
function pitrRestoreForm(t, p, box) {
  const target = h("input", { name: "TargetTableName", required: true, spellcheck: "false", value: t.TableName + "-restored" });
  const latest = h("input", { type: "checkbox", name: "latest", checked: true });
  // datetime-local has no zone: the console reads and writes it as UTC.
  const instant = h("input", { type: "datetime-local", name: "RestoreDateTime", step: "1", disabled: true,
    value: utc(p.LatestRestorableDateTime).slice(0, 19) });
  latest.addEventListener("change", () => { instant.disabled = latest.checked; });
  const over = restoreOverrides(t, t.BillingModeSummary?.BillingMode || "PROVISIONED");
  const msg = h("div");
  const f = h("form", { id: "pitr-restore-form" },
    h("h2", null, "Restore to a point in time"),
    h("p", { class: "hint" }, "Creates a new table holding this table's items as they were at the instant; its key schema, indexes and capacity are this table's, with the overrides below."),
    field("New table name", target),
    h("div", { class: "row" }, check("Latest restorable time", latest),
      field("Restore instant (UTC)", instant, `between ${utc(p.EarliestRestorableDateTime)} and ${utc(p.LatestRestorableDateTime)}`)),
    over.el, h("button", { type: "submit", class: "primary" }, "Restore"), msg);
  f.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clear(msg);
    const input = { SourceTableName: t.TableName, TargetTableName: target.value.trim(), ...over.value() };
    if (latest.checked) input.UseLatestRestorableTime = true;
    else {
      const at = Date.parse(instant.value + "Z");
      if (Number.isNaN(at)) { msg.append(errorBox("Choose the instant to restore to.")); return; }
      input.RestoreDateTime = at / 1000;
    }
    const r = await guard(() => client.call("RestoreTableToPointInTime", input), msg);
    if (r) restoreStarted(r.TableDescription, msg);
  });
  clear(box, f);
}

// restoreOverrides is the overrides part of a restore form for a source
// table described by src (a TableDescription, or a backup's source
// feature details) billed as srcBilling: the billing mode, the
// provisioned capacity or the on-demand maximum throughput, the
// encryption, and which secondary indexes to keep. value() is the
// request's override members; an index list is sent only when an index
// is dropped, and nothing for a choice left as the source's.
function restoreOverrides(src, srcBilling) {
  const billing = select([["", "As the source"], ["PAY_PER_REQUEST", "On demand"], ["PROVISIONED", "Provisioned"]], "", { name: "BillingModeOverride" });
  const rcu = h("input", { name: "rcu", type: "number", min: "1", value: "5" });
  const wcu = h("input", { name: "wcu", type: "number", min: "1", value: "5" });
  const prov = h("div", { class: "row", hidden: true }, field("Read capacity units", rcu), field("Write capacity units", wcu));
  // OnDemandThroughputOverride: the on-demand table's maximum request
  // units (empty: no maximum given).
  const mrru = h("input", { name: "MaxReadRequestUnits", type: "number", min: "1" });
  const mwru = h("input", { name: "MaxWriteRequestUnits", type: "number", min: "1" });
  const onDemand = h("div", { class: "row" }, field("Maximum read request units (optional)", mrru), field("Maximum write request units (optional)", mwru));
  const isOnDemand = () => billing.value === "PAY_PER_REQUEST" || (!billing.value && srcBilling === "PAY_PER_REQUEST");
  const layout = () => { prov.hidden = billing.value !== "PROVISIONED"; onDemand.hidden = !isOnDemand(); };
  billing.addEventListener("change", layout);
  layout();
  const sse = sseEditor(true, "the source's: " + (src.SSEDescription?.Status === "ENABLED"
    ? `KMS${src.SSEDescription.KMSMasterKeyArn ? " (" + src.SSEDescription.KMSMasterKeyArn + ")" : ""}` : "AWS owned key"));
  const boxes = [];
  const idx = h("div", { class: "row" });
  for (const [kind, list] of [["GSI", src.GlobalSecondaryIndexes || []], ["LSI", src.LocalSecondaryIndexes || []]]) {
    for (const i of list) {
      const c = h("input", { type: "checkbox", checked: true, "data-index": i.IndexName });
      boxes.push({ kind, i, c });
      idx.append(check(`Keep ${i.IndexName} (${kind})`, c));
    }
  }
  const el = h("fieldset", { class: "overrides" }, h("legend", null, "Overrides"),
    h("div", { class: "row" }, field("Billing mode", billing)), prov, onDemand,
    sse.el,
    boxes.length ? idx : h("p", { class: "hint" }, "No secondary indexes to keep or drop."));
  return {
    el,
    value() {
      const o = {};
      const throughput = { ReadCapacityUnits: Number(rcu.value), WriteCapacityUnits: Number(wcu.value) };
      if (billing.value) o.BillingModeOverride = billing.value;
      if (billing.value === "PROVISIONED") o.ProvisionedThroughputOverride = throughput;
      if (isOnDemand() && (mrru.value || mwru.value)) {
        o.OnDemandThroughputOverride = {};
        if (mrru.value) o.OnDemandThroughputOverride.MaxReadRequestUnits = Number(mrru.value);
        if (mwru.value) o.OnDemandThroughputOverride.MaxWriteRequestUnits = Number(mwru.value);
      }
      const spec = sse.value();
      if (spec) o.SSESpecificationOverride = spec;
      const dropped = (kind) => boxes.some((b) => b.kind === kind && !b.c.checked);
      const kept = (kind) => boxes.filter((b) => b.kind === kind && b.c.checked).map((b) => b.i);
      if (dropped("GSI")) {
        o.GlobalSecondaryIndexOverride = kept("GSI").map((i) => {
          const g = { IndexName: i.IndexName, KeySchema: i.KeySchema, Projection: i.Projection };
          if (billing.value === "PROVISIONED") g.ProvisionedThroughput = throughput;
          return g;
        });
      }
      if (dropped("LSI")) {
        o.LocalSecondaryIndexOverride = kept("LSI").map((i) => ({ IndexName: i.IndexName, KeySchema: i.KeySchema, Projection: i.Projection }));
      }
      return o;
    },
  };
}

// restoreStarted reports a restore's target table, in CREATING, and
// follows the job (backups page).
function restoreStarted(d, into) {
  status(`Restoring into ${d.TableName} (${d.TableStatus}).`);
  watchRestore(d.TableName);
  if (into) clear(into, h("p", null, "Restoring into ", link("#/table/" + encodeURIComponent(d.TableName), d.TableName),
    "; follow it under ", link("#/backups", "Backups"), "."));
}

// ---------- items ----------

async function describe(name) {
  return (await client.call("DescribeTable", { TableName: name })).Table;
}

function itemsView(args) {
  const tableName = args[0];
  if (!tableName) {
    pickTable();
    return;
  }
  const out = h("div");
  clear(main, h("div", { class: "titlebar" }, h("h1", null, "Items: ", h("span", { class: "name" }, tableName)),
    h("span", null, link("#/table/" + encodeURIComponent(tableName), "Manage table"), " · ", link("#/tables", "All tables"))), out);
  guard(async () => itemsPage(await describe(tableName)), out);
}

async function pickTable() {
  const list = h("ul", { class: "links" });
  clear(main, h("h1", null, "Items"), h("p", null, "Choose a table:"), list);
  const r = await guard(() => client.call("ListTables", { Limit: 100 }), main);
  if (!r) return;
  for (const n of r.TableNames) list.append(h("li", null, link("#/items/" + encodeURIComponent(n), n)));
  if (!r.TableNames.length) list.append(h("li", null, "No tables yet."));
}

function itemsPage(t) {
  const defs = Object.fromEntries((t.AttributeDefinitions || []).map((d) => [d.AttributeName, d.AttributeType]));
  const keysOf = (ks) => ({ pk: ks.find((k) => k.KeyType === "HASH")?.AttributeName, sk: ks.find((k) => k.KeyType === "RANGE")?.AttributeName });
  const indexes = [["", "Table"], ...(t.GlobalSecondaryIndexes || []).map((i) => [i.IndexName, i.IndexName + " (GSI)"]),
    ...(t.LocalSecondaryIndexes || []).map((i) => [i.IndexName, i.IndexName + " (LSI)"])];
  const schemaOf = (ix) => keysOf(ix ? [...(t.GlobalSecondaryIndexes || []), ...(t.LocalSecondaryIndexes || [])].find((i) => i.IndexName === ix).KeySchema : t.KeySchema);
  const tableKeys = keysOf(t.KeySchema);

  const mode = select([["scan", "Scan"], ["query", "Query"]], "scan", { name: "mode" });
  const index = select(indexes, "", { name: "index" });
  const pkLabel = h("span");
  const pkValue = h("input", { name: "pkValue", spellcheck: "false" });
  const skOp = select([["", "(any)"], ["=", "="], ["<", "<"], ["<=", "<="], [">", ">"], [">=", ">="], ["begins_with", "begins with"], ["between", "between"]], "", { name: "skOp" });
  const skValue = h("input", { name: "skValue", spellcheck: "false" });
  const skValue2 = h("input", { name: "skValue2", spellcheck: "false", "aria-label": "and" });
  const forward = select([["true", "Ascending"], ["false", "Descending"]], "true", { name: "forward" });
  const consistent = h("input", { type: "checkbox", name: "consistent" });
  const queryFields = h("div", { class: "query" });
  const filter = h("input", { name: "filter", spellcheck: "false", placeholder: "#c = :c AND attribute_exists(note)" });
  const projection = h("input", { name: "projection", spellcheck: "false", placeholder: "pk, sk, #c" });
  const names = h("input", { name: "names", spellcheck: "false", placeholder: '{"#c": "color"}' });
  const values = h("input", { name: "values", spellcheck: "false", placeholder: '{":c": {"S": "red"}}' });
  const more = h("details", { class: "more" }, h("summary", null, "Filter and projection"),
    h("div", { class: "row" }, field("Filter expression", filter), field("Projection expression", projection)),
    h("div", { class: "row" }, field("Expression attribute names (JSON)", names), field("Expression attribute values (DynamoDB JSON)", values)));
  const run = h("button", { type: "submit", class: "primary" }, "Run");
  const form = h("form", { class: "card", id: "query" },
    h("div", { class: "row" }, field("Operation", mode), field("Index", index),
      h("div", { class: "field check" }, consistent, h("label", { for: consistent.id = "consistent" }, "Consistent read"))),
    queryFields, more, run,
    h("button", { type: "button", id: "new-item", onclick: () => editItem(null) }, "New item"));
  const results = h("div", { id: "results" });
  const editor = h("div", { id: "editor" });
  main.append(h("p", { class: "meta" }, `${t.TableStatus} · ${t.ItemCount ?? 0} items · ${formatBytes(t.TableSizeBytes)} · key ${keySchemaText(t.KeySchema, t.AttributeDefinitions)}`),
    form, editor, results);

  function layout() {
    const { pk, sk } = schemaOf(index.value);
    clear(pkLabel, `Partition key ${pk} =`);
    const isGSI = (t.GlobalSecondaryIndexes || []).some((i) => i.IndexName === index.value);
    consistent.disabled = isGSI;
    if (isGSI) consistent.checked = false;
    if (mode.value !== "query") { clear(queryFields); return; }
    clear(queryFields,
      h("div", { class: "row" }, field(pkLabel, pkValue)),
      sk ? h("div", { class: "row" }, field(`Sort key ${sk}`, skOp), skOp.value ? field("Value", skValue) : null,
        skOp.value === "between" ? field("and", skValue2) : null) : null,
      h("div", { class: "row" }, field("Order", forward)));
  }
  mode.addEventListener("change", layout);
  index.addEventListener("change", layout);
  skOp.addEventListener("change", layout);
  layout();

  function av(name, text) {
    const type = defs[name] || "S";
    return { [type]: text };
  }

  function request() {
    const input = { TableName: t.TableName, Limit: 100 };
    if (index.value) input.IndexName = index.value;
    if (consistent.checked) input.ConsistentRead = true;
    if (mode.value === "scan") return ["Scan", input];
    const { pk, sk } = schemaOf(index.value);
    input.KeyConditionExpression = "#pk = :pk";
    input.ExpressionAttributeNames = { "#pk": pk };
    input.ExpressionAttributeValues = { ":pk": av(pk, pkValue.value) };
    if (sk && skOp.value) {
      input.ExpressionAttributeNames["#sk"] = sk;
      input.ExpressionAttributeValues[":sk"] = av(sk, skValue.value);
      if (skOp.value === "begins_with") input.KeyConditionExpression += " AND begins_with(#sk, :sk)";
      else if (skOp.value === "between") {
        input.KeyConditionExpression += " AND #sk BETWEEN :sk AND :sk2";
        input.ExpressionAttributeValues[":sk2"] = av(sk, skValue2.value);
      } else input.KeyConditionExpression += ` AND #sk ${skOp.value} :sk`;
    }
    input.ScanIndexForward = forward.value === "true";
    return ["Query", input];
  }

  // extras adds the filter, the projection and their placeholders to a
  // request the builder made (its own placeholders are #pk, #sk, :pk,
  // :sk and :sk2).
  function extras(input) {
    const json = (el, what) => {
      if (!el.value.trim()) return {};
      const v = JSON.parse(el.value);
      if (!v || typeof v !== "object" || Array.isArray(v)) throw new Error(what + " must be a JSON object");
      return v;
    };
    const n = json(names, "Expression attribute names");
    const v = json(values, "Expression attribute values");
    if (filter.value.trim()) input.FilterExpression = filter.value.trim();
    if (projection.value.trim()) input.ProjectionExpression = projection.value.trim();
    if (Object.keys(n).length) input.ExpressionAttributeNames = { ...input.ExpressionAttributeNames, ...n };
    if (Object.keys(v).length) input.ExpressionAttributeValues = { ...input.ExpressionAttributeValues, ...v };
    return input;
  }

  async function runPage(op, input, pageNo) {
    const r = await guard(() => client.call(op, input), clear(results));
    if (!r) return;
    const items = r.Items || [];
    const cols = [];
    for (const k of [tableKeys.pk, tableKeys.sk, ...Object.values(schemaOf(index.value))]) if (k && !cols.includes(k)) cols.push(k);
    for (const it of items) for (const k of Object.keys(it)) if (!cols.includes(k)) cols.push(k);
    const shown = cols.slice(0, 12);
    const tbody = h("tbody");
    for (const it of items) {
      tbody.append(h("tr", null,
        h("td", null, h("button", { type: "button", class: "small", onclick: () => openItem(it) }, "Edit")),
        shown.map((c) => h("td", null, it[c] ? cellText(it[c]) : ""))));
    }
    clear(results,
      h("p", { class: "meta" }, `${op} page ${pageNo}: ${items.length} items (${r.ScannedCount ?? items.length} read)`),
      h("div", { class: "scroll" }, h("table", { class: "grid items" },
        h("thead", null, h("tr", null, h("th", { scope: "col" }, ""), shown.map((c) => h("th", { scope: "col" }, c)))), tbody)),
      cols.length > shown.length ? h("p", { class: "hint" }, `${cols.length - shown.length} more attributes: open an item to see them.`) : null,
      r.LastEvaluatedKey ? h("div", { class: "pager" }, h("button", { type: "button", id: "next-page", onclick: () => runPage(op, { ...input, ExclusiveStartKey: r.LastEvaluatedKey }, pageNo + 1) }, "Next page")) : null);
  }

  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    status("");
    const [op, input] = request();
    try {
      extras(input);
    } catch (e) {
      clear(results, errorBox(e));
      return;
    }
    runPage(op, input, 1);
  });
  // The first page of a scan is shown on opening the table (100 items:
  // as cheap on a large table as on a small one).
  form.requestSubmit();

  function keyOf(item) {
    const k = {};
    for (const n of [tableKeys.pk, tableKeys.sk]) if (n && item[n]) k[n] = item[n];
    return k;
  }

  // openItem reads the whole item again by its key (a row may be a
  // projection, or an index's copy, or stale) before editing it: putting
  // back a partial item would drop its other attributes.
  async function openItem(row) {
    const r = await guard(() => client.call("GetItem", { TableName: t.TableName, Key: keyOf(row), ConsistentRead: true }), clear(editor));
    if (!r) return;
    if (!r.Item) { clear(editor, errorBox("The item no longer exists.")); return; }
    editItem(r.Item);
  }

  // editItem edits item (null: a new one, starting from initial).
  function editItem(item, initial) {
    const text = h("textarea", { name: "item", rows: 14, spellcheck: "false" });
    text.value = JSON.stringify(item || initial || { [tableKeys.pk]: { [defs[tableKeys.pk]]: "" } }, null, 2);
    const plainView = h("pre", { class: "plain", hidden: true });
    const msg = h("div");
    const toggle = h("button", { type: "button", onclick: () => {
      try {
        const v = JSON.parse(text.value);
        clear(plainView, JSON.stringify(plain({ M: v }), null, 2));
        plainView.hidden = !plainView.hidden;
      } catch (e) { clear(msg, errorBox("Not valid JSON: " + e.message)); }
    } }, "Plain JSON");
    const put = h("button", { type: "submit", class: "primary" }, "Put item");
    const del = item ? h("button", { type: "button", class: "danger", onclick: async () => {
      clear(msg);
      const r = await guard(() => client.call("DeleteItem", { TableName: t.TableName, Key: keyOf(item) }), msg);
      if (r) { status("Item deleted."); clear(editor); form.requestSubmit(); }
    } }, "Delete item") : null;
    const dup = item ? h("button", { type: "button", onclick: () => {
      try { editItem(null, JSON.parse(text.value)); } catch (e) { clear(msg, errorBox("Not valid JSON: " + e.message)); }
    } }, "Duplicate") : null;
    const f = h("form", { class: "card", id: "item-form" },
      h("h2", null, item ? "Item" : "New item"),
      field("Item (DynamoDB JSON)", text), plainView,
      h("div", { class: "buttons" }, put, toggle, dup, del,
        h("button", { type: "button", onclick: () => clear(editor) }, "Close")), msg);
    f.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      clear(msg);
      let v;
      try {
        v = JSON.parse(text.value);
        if (!v || typeof v !== "object" || Array.isArray(v)) throw new Error("an item is a JSON object of attribute values");
      } catch (e) { msg.append(errorBox("Not valid: " + e.message)); return; }
      const r = await guard(() => client.call("PutItem", { TableName: t.TableName, Item: v }), msg);
      if (r) { status("Item saved."); clear(editor); form.requestSubmit(); }
    });
    clear(editor, f);
    text.focus();
  }
}

// ---------- PartiQL ----------

function partiqlView() {
  const stmt = h("textarea", { name: "statement", rows: 4, spellcheck: "false" });
  stmt.value = sessionStorage.getItem("extenddb.console.partiql") || "";
  const params = h("input", { name: "parameters", spellcheck: "false", placeholder: '[{"S": "a"}]' });
  const consistent = h("input", { type: "checkbox", name: "consistent" });
  const results = h("div", { id: "partiql-results" });
  const f = h("form", { class: "card", id: "partiql" },
    field("Statement", stmt), field("Parameters (JSON array of attribute values, for ?)", params),
    h("div", { class: "field check" }, consistent, h("label", { for: consistent.id = "pconsistent" }, "Consistent read")),
    h("button", { type: "submit", class: "primary" }, "Run"));
  clear(main, h("h1", null, "PartiQL"), f, results);
  async function run(token, n) {
    const input = { Statement: stmt.value };
    if (params.value.trim()) {
      try { input.Parameters = JSON.parse(params.value); } catch (e) { clear(results, errorBox("Parameters: " + e.message)); return; }
    }
    if (consistent.checked) input.ConsistentRead = true;
    if (token) input.NextToken = token;
    sessionStorage.setItem("extenddb.console.partiql", stmt.value);
    const r = await guard(() => client.call("ExecuteStatement", input), clear(results));
    if (!r) return;
    const items = r.Items || [];
    const cols = [];
    for (const it of items) for (const k of Object.keys(it)) if (!cols.includes(k)) cols.push(k);
    clear(results, h("p", { class: "meta" }, `Page ${n}: ${items.length} items`),
      items.length ? h("div", { class: "scroll" }, h("table", { class: "grid" },
        h("thead", null, h("tr", null, cols.map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", null, items.map((it) => h("tr", null, cols.map((c) => h("td", null, it[c] ? cellText(it[c]) : ""))))))) : null,
      r.NextToken ? h("button", { type: "button", onclick: () => run(r.NextToken, n + 1) }, "Next page") : null);
  }
  f.addEventListener("submit", (ev) => { ev.preventDefault(); run(null, 1); });
}

// ---------- jobs ----------

// jobs are the backup and restore jobs this tab follows: those it started
// and those /metrics shows running. A job is keyed by its kind and table
// (a backup's source, a restore's target) and, for a backup, its id.
const jobs = new Map();
let jobsTimer = null;
let jobsRender = null; // the backups page's jobs table, while shown

const JOB_SERIES = ["extenddb_backup_job_items", "extenddb_backup_job_bytes", "extenddb_backup_job_total_items", "extenddb_backup_job_total_bytes"];

function jobOf(kind, table, id) {
  const key = kind === "restore" ? `restore/${table}` : `${kind}/${table}/${id}`;
  let j = jobs.get(key);
  if (!j || (kind === "restore" && j.state !== "running" && id && j.id !== id)) {
    j = { key, kind, table, id, state: "running", phase: "", items: 0, bytes: 0, totalItems: 0, totalBytes: 0, samples: [], reason: "", started: Date.now() };
    jobs.set(key, j);
  }
  return j;
}

// watchBackup follows a backup this tab started until AVAILABLE or FAILED.
function watchBackup(d) {
  const j = jobOf("backup", d.TableName || d.BackupArn.split(":table/")[1].split("/")[0], d.BackupArn.split("/backup/")[1]);
  j.arn = d.BackupArn;
  j.name = d.BackupName;
  // The table's item count and size, as DescribeTable reports them, are
  // the backup's expected totals (the job itself knows them only at the end).
  client.call("DescribeTable", { TableName: j.table }).then((r) => {
    j.estItems = r.Table.ItemCount;
    j.estBytes = r.Table.TableSizeBytes;
  }, () => {});
  pollJobs();
}

// watchRestore follows the restore into table until it is ACTIVE or FAILED.
function watchRestore(table) {
  const j = jobOf("restore", table, "");
  j.state = "running";
  pollJobs();
}

// pollJobs reads /metrics and the API every second while a followed job
// runs or the backups page is shown.
async function pollJobs() {
  clearTimeout(jobsTimer);
  jobsTimer = null;
  let text = "";
  try {
    const r = await fetch("/metrics", { cache: "no-store", credentials: "omit" });
    if (r.ok) text = await r.text();
  } catch { /* the API checks below still run */ }
  const now = Date.now();
  const live = new Set();
  const series = parseMetrics(text, new Set(JOB_SERIES));
  const byJob = new Map();
  for (const x of series) {
    const k = `${x.labels.kind}\u0000${x.labels.table}\u0000${x.labels.job}`;
    const v = byJob.get(k) || byJob.set(k, { labels: x.labels }).get(k);
    v[x.name.slice("extenddb_backup_job_".length)] = x.value;
  }
  for (const { labels, items, bytes, total_items: ti, total_bytes: tb } of byJob.values()) {
    if (!["backup", "restore", "export", "import"].includes(labels.kind)) continue;
    const j = jobOf(labels.kind, labels.table, labels.job);
    live.add(j);
    j.id = labels.job;
    j.state = "running";
    j.phase = labels.phase;
    j.items = items || 0;
    j.bytes = bytes || 0;
    j.totalItems = ti || 0;
    j.totalBytes = tb || 0;
    addSample(j.samples, { at: now, items: j.items, bytes: j.bytes });
  }
  // The server keeps a failed job's reason on /metrics for a while (the
  // API has no failed backup or restore to describe).
  const failures = new Map();
  for (const x of parseMetrics(text, new Set(["extenddb_backup_job_failed"]))) {
    const key = x.labels.kind === "restore" ? `restore/${x.labels.table}` : `${x.labels.kind}/${x.labels.table}/${x.labels.job}`;
    failures.set(key, { at: x.value * 1000, reason: x.labels.reason });
  }
  // A followed job not on /metrics (not started yet, or finished) is
  // looked up through the API.
  await Promise.all([...jobs.values()].filter((j) => j.state === "running" && !live.has(j)).map((j) => settle(j, failures.get(j.key))));
  // A job seen failing before its reason reached /metrics gets it later.
  for (const j of jobs.values()) {
    const f = failures.get(j.key);
    if (j.state === "FAILED" && !j.why && f && f.at >= j.started - 1000) j.reason = j.why = f.reason;
  }
  if (jobsRender) jobsRender();
  if ([...jobs.values()].some((j) => j.state === "running") || jobsRender) jobsTimer = setTimeout(pollJobs, 1000);
}

// settle asks the API where a job not running on /metrics stands;
// failure is the job's entry among /metrics' recent failures, if any.
async function settle(j, failure) {
  // A failure from before this tab followed the job is an earlier job's
  // (the second is the metric's resolution).
  const why = failure && failure.at >= j.started - 1000 ? failure.reason : "";
  j.why = why;
  try {
    if (j.kind === "export") {
      if (!j.arn) {
        const tableArn = (await describe(j.table)).TableArn;
        let token;
        do {
          const r = await client.call("ListExports", token ? { TableArn: tableArn, MaxResults: 25, NextToken: token } : { TableArn: tableArn, MaxResults: 25 });
          j.arn = (r.ExportSummaries || []).find((x) => x.ExportArn.endsWith("/export/" + j.id))?.ExportArn;
          token = j.arn ? null : r.NextToken;
        } while (token);
        if (!j.arn) return;
      }
      const x = (await client.call("DescribeExport", { ExportArn: j.arn })).ExportDescription;
      if (x.ExportStatus === "COMPLETED") {
        j.state = "COMPLETED";
        if (x.ItemCount != null) { j.items = x.ItemCount; j.itemsKnown = true; }
        if (x.BilledSizeBytes != null) { j.bytes = x.BilledSizeBytes; j.bytesKnown = true; }
      } else if (x.ExportStatus === "FAILED") {
        j.state = "FAILED";
        j.reason = `${x.FailureCode || ""}: ${x.FailureMessage || ""}`;
      }
    } else if (j.kind === "import") {
      if (!j.arn) {
        const r = await client.call("ListImports", { PageSize: 25 });
        j.arn = (r.ImportSummaryList || []).find((x) => x.ImportArn.endsWith("/import/" + j.id))?.ImportArn;
        if (!j.arn) return;
      }
      const x = (await client.call("DescribeImport", { ImportArn: j.arn })).ImportTableDescription;
      if (x.ImportStatus === "COMPLETED" || x.ImportStatus === "FAILED") {
        j.state = x.ImportStatus;
        j.items = x.ImportedItemCount;
        j.itemsKnown = true;
        if (x.ProcessedSizeBytes != null) { j.bytes = x.ProcessedSizeBytes; j.bytesKnown = true; }
        if (x.ImportStatus === "FAILED") j.reason = `${x.FailureCode || ""}: ${x.FailureMessage || ""}`;
        if (x.ErrorCount) j.reason = `${j.reason ? j.reason + "; " : ""}${x.ErrorCount} items refused`;
      }
    } else if (j.kind === "backup") {
      let arn = j.arn;
      if (!arn) {
        const r = await client.call("ListBackups", { TableName: j.table });
        arn = (r.BackupSummaries || []).find((b) => b.BackupArn.endsWith("/backup/" + j.id))?.BackupArn;
        if (!arn) throw Object.assign(new Error("not listed"), { type: "BackupNotFoundException" });
        j.arn = arn;
      }
      const b = (await client.call("DescribeBackup", { BackupArn: arn })).BackupDescription.BackupDetails;
      j.name = b.BackupName;
      if (b.BackupStatus === "AVAILABLE") {
        j.state = "AVAILABLE";
        if (b.BackupSizeBytes != null) { j.bytes = b.BackupSizeBytes; j.bytesKnown = true; }
      } else if (b.BackupStatus !== "CREATING") {
        j.state = b.BackupStatus;
      }
    } else {
      const t = (await client.call("DescribeTable", { TableName: j.table })).Table;
      if (t.TableStatus === "ACTIVE" && !t.RestoreSummary?.RestoreInProgress) {
        j.state = "COMPLETED";
        if (t.ItemCount != null) { j.items = t.ItemCount; j.itemsKnown = true; }
        if (t.TableSizeBytes != null) { j.bytes = t.TableSizeBytes; j.bytesKnown = true; }
      }
    }
  } catch (e) {
    if (e.type === "BackupNotFoundException") {
      j.state = "FAILED";
      j.reason = why || "the backup was not completed and is no longer listed (a failed backup is not kept); the server's log says why";
    } else if (e.type === "ResourceNotFoundException") {
      j.state = "FAILED";
      j.reason = why || "the restore failed and its target table was removed; the server's log says why";
    } else {
      j.reason = e.message;
    }
  }
  if (j.state !== "running") j.ended = j.ended || Date.now();
}

// showJobs keeps body filled with the followed jobs that pass keep,
// newest first, while body is on the page.
function showJobs(body, keep, none) {
  jobsRender = () => {
    if (!main.contains(body)) { jobsRender = null; return; }
    const list = [...jobs.values()].filter(keep).sort((a, b) => b.started - a.started);
    clear(body, list.length ? list.map(jobRow) : h("tr", null, h("td", { colspan: 9 }, none)));
  };
  jobsRender();
  pollJobs();
}

function jobsTable(body, what) {
  return h("div", { class: "scroll" }, h("table", { class: "grid", id: "jobs" },
    h("thead", null, h("tr", null, ["Kind", "Table", what, "Status", "Items", "Bytes", "Rate", "ETA", "Detail"].map((x) => h("th", { scope: "col" }, x)))), body));
}

function jobRow(j) {
  const p = progress(j.samples, j.totalItems || j.estItems, j.totalBytes || j.estBytes);
  const running = j.state === "running";
  const pct = running && p.fraction != null ? ` ${(100 * p.fraction).toFixed(0)} %` : "";
  const estimated = running && !j.totalItems && j.estItems ? " (total estimated from the table)" : "";
  return h("tr", { "data-job": j.key },
    h("td", null, j.kind), h("td", null, j.table), h("td", null, j.name || j.id || ""),
    h("td", { class: running ? "" : j.state === "FAILED" ? "bad" : "ok" }, running ? `running${j.phase ? " (" + j.phase + ")" : ""}${pct}` : j.state),
    // A count is shown once known: from /metrics while the job ran, or
    // from the API's answer at its end.
    h("td", null, running || j.samples.length || j.itemsKnown ? String(j.items) : ""),
    h("td", null, running || j.samples.length || j.bytesKnown ? formatBytes(j.bytes) : ""),
    h("td", null, running && p.rate != null ? `${p.rate.toFixed(0)} items/s, ${formatBytes(p.byteRate)}/s` : ""),
    h("td", null, running ? duration(p.eta) : `took ${duration(((j.ended || Date.now()) - j.started) / 1000)}`),
    h("td", null, (j.reason || "") + estimated));
}

// ---------- backups ----------

function backupsView() {
  const out = h("div");
  const body = h("tbody");
  const names = h("datalist", { id: "table-names" });
  const table = h("input", { name: "table", spellcheck: "false", list: "table-names", autocomplete: "off" });
  client.call("ListTables", { Limit: 100 }).then((r) => {
    for (const n of r.TableNames) names.append(h("option", { value: n }));
  }, () => { /* the field still takes a typed name */ });
  const bname = h("input", { name: "backupName", spellcheck: "false" });
  const f = h("form", { class: "card", id: "create-backup" }, h("h2", null, "Create backup"),
    h("div", { class: "row" }, field("Table", table), field("Backup name", bname)),
    h("button", { type: "submit", class: "primary" }, "Create backup"));
  const more = h("div", { class: "pager" });
  const jobBody = h("tbody");
  clear(main, h("h1", null, "Backups"), f, names, out,
    h("h2", null, "Jobs"), jobsTable(jobBody, "Backup"),
    h("h2", null, "Backups"),
    h("div", { class: "scroll" }, h("table", { class: "grid", id: "backups" },
      h("thead", null, h("tr", null, ["Backup", "Table", "Status", "Created", "Size", ""].map((x) => h("th", { scope: "col" }, x)))), body)),
    more);
  showJobs(jobBody, (j) => j.kind !== "export", "No backup or restore running.");
  let timer = null;
  // load shows the first page of 100 backups (start: the next page,
  // appended); while one is CREATING the first page is read again every
  // second.
  async function load(start) {
    const r = await guard(() => client.call("ListBackups", start ? { Limit: 100, ExclusiveStartBackupArn: start } : { Limit: 100 }), clear(out));
    if (!r) return;
    if (!start) clear(body);
    clear(more, r.LastEvaluatedBackupArn ? h("button", { type: "button", onclick: () => load(r.LastEvaluatedBackupArn) }, "More backups") : null);
    let pending = false;
    for (const b of r.BackupSummaries || []) {
      if (b.BackupStatus === "CREATING") pending = true;
      const row = h("tr", { "data-backup": b.BackupArn }, h("td", null, b.BackupName), h("td", null, b.TableName), h("td", null, b.BackupStatus),
        h("td", null, b.BackupCreationDateTime ? new Date(b.BackupCreationDateTime * 1000).toISOString() : ""),
        h("td", null, formatBytes(b.BackupSizeBytes)),
        h("td", { class: "actions" }, b.BackupStatus === "AVAILABLE"
          ? [h("button", { type: "button", class: "small", onclick: () => restoreBackupForm(b, row) }, "Restore…"), " ", deleteButton(b)] : ""));
      body.append(row);
    }
    if (!start && !(r.BackupSummaries || []).length) body.append(h("tr", null, h("td", { colspan: 6 }, "No backups.")));
    clearTimeout(timer);
    if (pending && location.hash.startsWith("#/backups")) timer = setTimeout(() => load(), 1000);
  }
  // restoreBackupForm opens, under the backup's row, the form restoring it
  // into a new table with overrides of the backup's indexes and capacity.
  async function restoreBackupForm(b, row) {
    if (row.nextSibling?.classList?.contains("restore-row")) { row.nextSibling.remove(); return; }
    const cell = h("td", { colspan: 6 });
    const tr = h("tr", { class: "restore-row" }, cell);
    row.after(tr);
    const d = await guard(() => client.call("DescribeBackup", { BackupArn: b.BackupArn }), cell);
    if (!d) return;
    const src = d.BackupDescription.SourceTableFeatureDetails || {};
    const over = restoreOverrides(src, d.BackupDescription.SourceTableDetails?.BillingMode || "PROVISIONED");
    const target = h("input", { name: "TargetTableName", required: true, spellcheck: "false" });
    const msg = h("div");
    const f = h("form", { class: "restore", "aria-label": "Restore backup" },
      h("p", null, "Restore ", h("strong", null, b.BackupName), " of ", h("strong", null, b.TableName), " into a new table."),
      field("New table name", target), over.el,
      h("button", { type: "submit", class: "primary" }, "Restore"),
      h("button", { type: "button", onclick: () => tr.remove() }, "Cancel"), msg);
    f.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      clear(msg);
      const x = await guard(() => client.call("RestoreTableFromBackup", { BackupArn: b.BackupArn, TargetTableName: target.value.trim(), ...over.value() }), msg);
      if (x) { restoreStarted(x.TableDescription); tr.remove(); }
    });
    clear(cell, f);
    target.focus();
  }
  // deleteButton asks once more before DeleteBackup.
  function deleteButton(b) {
    const btn = h("button", { type: "button", class: "danger small" }, "Delete");
    btn.addEventListener("click", async () => {
      if (btn.dataset.armed !== "1") {
        btn.dataset.armed = "1";
        clear(btn, "Confirm delete");
        return;
      }
      const x = await guard(() => client.call("DeleteBackup", { BackupArn: b.BackupArn }), out);
      if (x) { status(`Backup ${b.BackupName} deleted.`); load(); }
    });
    btn.addEventListener("blur", () => { btn.dataset.armed = ""; clear(btn, "Delete"); });
    return btn;
  }
  f.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const r = await guard(() => client.call("CreateBackup", { TableName: table.value.trim(), BackupName: bname.value.trim() }), clear(out));
    if (r) {
      status(`Backup ${r.BackupDetails.BackupName} ${r.BackupDetails.BackupStatus}.`);
      watchBackup({ ...r.BackupDetails, TableName: table.value.trim() });
      load();
    }
  });
  load();
}

// ---------- backup plans ----------

const PLAN_SERIES = ["extenddb_backup_plan_info", "extenddb_backup_plan_next_run_timestamp_seconds", "extenddb_backup_plan_last_run_timestamp_seconds",
  "extenddb_backup_plan_last_run_succeeded", "extenddb_backup_plan_last_success_timestamp_seconds", "extenddb_backup_plan_failures_total"];

// plansView shows the configured backup plans ([[backup.plans]]) as
// /metrics exports them (definition, next slot, last run and its result,
// last success, this server's failures) and the backups each keeps: the
// AWS_BACKUP backups named after it (ListBackups, every page), as
// `extenddb backup plans` prints them.
async function plansView() {
  const out = h("div");
  const body = h("tbody");
  const kept = h("div", { id: "plan-backups" });
  clear(main, h("div", { class: "titlebar" }, h("h1", null, "Backup plans"), h("button", { type: "button", onclick: () => plansView() }, "Refresh")),
    h("p", { class: "hint" }, "The server's ", h("code", null, "[[backup.plans]]"), " (docs/backup.md): a plan backs up the tables it covers at each slot of its schedule as ",
      h("code", null, "<plan>-<table>-<slot>"), " and keeps what its retention says. Times are UTC."), out,
    h("div", { class: "scroll" }, h("table", { class: "grid", id: "plans" },
      h("thead", null, h("tr", null, ["Plan", "Account", "Tables", "Schedule", "Retention", "Last run", "Result", "Last success", "Failures", "Next run", "Kept"]
        .map((x) => h("th", { scope: "col" }, x)))), body)), kept);
  let text = "";
  try {
    const r = await fetch("/metrics", { cache: "no-store", credentials: "omit" });
    if (!r.ok) throw new Error("HTTP " + r.status);
    text = await r.text();
  } catch (e) {
    out.append(errorBox("Metrics unavailable: " + e.message));
    return;
  }
  const plans = new Map();
  for (const x of parseMetrics(text, new Set(PLAN_SERIES))) {
    const p = plans.get(x.labels.plan) || plans.set(x.labels.plan, { name: x.labels.plan }).get(x.labels.plan);
    if (x.name === "extenddb_backup_plan_info") p.info = x.labels;
    else p[x.name.replace(/^extenddb_backup_plan_/, "")] = x.value;
  }
  const list = [...plans.values()].filter((p) => p.info).sort((a, b) => a.name.localeCompare(b.name));
  if (!list.length) {
    body.append(h("tr", null, h("td", { colspan: 11 }, "No backup plans are configured on this server ([[backup.plans]] in its configuration).")));
    return;
  }
  // The backups the plans keep: AWS_BACKUP type, named "<plan>-...".
  const backups = [];
  let start;
  do {
    const r = await guard(() => client.call("ListBackups", start ? { BackupType: "AWS_BACKUP", ExclusiveStartBackupArn: start } : { BackupType: "AWS_BACKUP" }), out);
    if (!r) break;
    backups.push(...(r.BackupSummaries || []));
    start = r.LastEvaluatedBackupArn;
  } while (start && main.contains(body));
  // An instant to the second, as the schedule's slots are.
  const at = (v) => utc(v).replace(/\.\d{3}Z$/, "Z");
  const stamp = (v) => (v ? at(v) : "never");
  for (const p of list) {
    const mine = backups.filter((b) => b.BackupName.startsWith(p.name + "-"))
      .sort((a, b) => (b.BackupCreationDateTime || 0) - (a.BackupCreationDateTime || 0));
    const result = p.last_run_succeeded == null || !p.last_run_timestamp_seconds ? "" : p.last_run_succeeded === 1 ? "succeeded" : "FAILED";
    body.append(h("tr", { "data-plan": p.name }, h("th", { scope: "row" }, p.name), h("td", null, p.info.account), h("td", null, p.info.tables.split(",").join(", ")),
      h("td", null, p.info.schedule), h("td", null, p.info.retention),
      h("td", { class: "when" }, stamp(p.last_run_timestamp_seconds)), h("td", { class: result === "FAILED" ? "bad" : result ? "ok" : "" }, result),
      h("td", { class: "when" }, stamp(p.last_success_timestamp_seconds)), h("td", null, String(p.failures_total ?? 0)),
      h("td", { class: "when" }, p.next_run_timestamp_seconds ? at(p.next_run_timestamp_seconds) : ""), h("td", null, String(mine.length))));
    kept.append(h("section", { class: "card", "data-plan": p.name }, h("h2", null, `${p.name} keeps ${mine.length} backup${mine.length === 1 ? "" : "s"}`),
      mine.length ? h("div", { class: "scroll" }, h("table", { class: "grid" },
        h("thead", null, h("tr", null, ["Backup", "Table", "Status", "Created", "Expires", "Size"].map((x) => h("th", { scope: "col" }, x)))),
        h("tbody", null, mine.map((b) => h("tr", { "data-backup": b.BackupArn }, h("td", null, b.BackupName), h("td", null, b.TableName), h("td", null, b.BackupStatus),
          h("td", { class: "when" }, at(b.BackupCreationDateTime)), h("td", { class: "when" }, b.BackupExpiryDateTime ? at(b.BackupExpiryDateTime) : ""),
          h("td", null, formatBytes(b.BackupSizeBytes))))))) : h("p", null, "None in this account yet."),
      mine.length ? h("p", { class: "hint" }, "Restore or delete them on ", link("#/backups", "Backups"), ".") : null));
  }
}

// ---------- exports ----------

function exportsView() {
  const out = h("div");
  const names = h("datalist", { id: "export-table-names" });
  client.call("ListTables", { Limit: 100 }).then((r) => {
    for (const n of r.TableNames) names.append(h("option", { value: n }));
  }, () => { /* the field still takes a typed name */ });
  const table = h("input", { name: "table", required: true, spellcheck: "false", list: "export-table-names", autocomplete: "off" });
  const bucket = h("input", { name: "S3Bucket", required: true, spellcheck: "false" });
  const prefix = h("input", { name: "S3Prefix", spellcheck: "false" });
  const fmt = select([["DYNAMODB_JSON", "DynamoDB JSON"], ["ION", "Amazon Ion"]], "DYNAMODB_JSON", { name: "ExportFormat" });
  const at = h("input", { type: "datetime-local", name: "ExportTime", step: "1" });
  const f = h("form", { class: "card", id: "start-export" }, h("h2", null, "Export a table to S3"),
    h("p", { class: "hint" }, "The table needs point-in-time recovery; the bucket is one of the server's ", h("code", null, "[s3]"), " section (docs/exports.md)."),
    h("div", { class: "row" }, field("Table", table), field("S3 bucket", bucket), field("S3 prefix (optional)", prefix)),
    h("div", { class: "row" }, field("Format", fmt), field("Export time (UTC, optional)", at, "empty: now")),
    h("button", { type: "submit", class: "primary" }, "Start export"));
  const jobBody = h("tbody");
  const body = h("tbody");
  const more = h("div", { class: "pager" });
  clear(main, h("h1", null, "Exports"), f, names, out, h("h2", null, "Jobs"), jobsTable(jobBody, "Export"),
    h("h2", null, "Exports"),
    h("div", { class: "scroll" }, h("table", { class: "grid", id: "exports" },
      h("thead", null, h("tr", null, ["Export", "Table", "Status", "Started", "Ended", "Items", "Size", "Where", "Detail"].map((x) => h("th", { scope: "col" }, x)))), body)),
    more);
  showJobs(jobBody, (j) => j.kind === "export", "No export running.");
  let timer = null;
  // load lists the exports 25 at a time (the API's most), each described;
  // the first page is read again every 2 seconds while one is running.
  async function load(token) {
    const r = await guard(() => client.call("ListExports", token ? { MaxResults: 25, NextToken: token } : { MaxResults: 25 }), clear(out));
    if (!r) return;
    if (!token) clear(body);
    const ds = await Promise.all((r.ExportSummaries || []).map((x) => client.call("DescribeExport", { ExportArn: x.ExportArn })
      .then((d) => d.ExportDescription, () => x)));
    let running = false;
    for (const d of ds) {
      if (d.ExportStatus === "IN_PROGRESS") running = true;
      body.append(h("tr", { "data-export": d.ExportArn }, h("td", null, d.ExportArn.split("/export/")[1] || d.ExportArn),
        h("td", null, (d.TableArn || "").split("/").pop()),
        h("td", { class: d.ExportStatus === "FAILED" ? "bad" : d.ExportStatus === "COMPLETED" ? "ok" : "" }, d.ExportStatus),
        h("td", null, utc(d.StartTime)), h("td", null, utc(d.EndTime)),
        h("td", null, d.ItemCount == null ? "" : String(d.ItemCount)), h("td", null, formatBytes(d.BilledSizeBytes)),
        h("td", null, d.S3Bucket ? `s3://${d.S3Bucket}/${d.ExportManifest || d.S3Prefix || ""}` : ""),
        h("td", null, d.ExportStatus === "FAILED" ? `${d.FailureCode || ""}: ${d.FailureMessage || ""}` : d.ExportFormat || "")));
    }
    if (!token && !ds.length) body.append(h("tr", null, h("td", { colspan: 9 }, "No exports.")));
    clear(more, r.NextToken ? h("button", { type: "button", onclick: () => load(r.NextToken) }, "More exports") : null);
    clearTimeout(timer);
    if (!token && running) timer = setTimeout(() => { if (main.contains(body)) load(); }, 2000);
  }
  f.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clear(out);
    const t = await guard(() => describe(table.value.trim()), out);
    if (!t) return;
    const input = { TableArn: t.TableArn, S3Bucket: bucket.value.trim(), ExportFormat: fmt.value };
    if (prefix.value.trim()) input.S3Prefix = prefix.value.trim();
    if (at.value) input.ExportTime = Date.parse(at.value + "Z") / 1000;
    const r = await guard(() => client.call("ExportTableToPointInTime", input), out);
    if (!r) return;
    const d = r.ExportDescription;
    status(`Export of ${t.TableName} ${d.ExportStatus}.`);
    const j = jobOf("export", t.TableName, d.ExportArn.split("/export/")[1]);
    j.arn = d.ExportArn;
    j.estItems = t.ItemCount;
    j.estBytes = t.TableSizeBytes;
    pollJobs();
    load();
  });
  load();
}

// ---------- imports ----------

function importsView() {
  const out = h("div");
  const types = KEY_TYPES;
  const bucket = h("input", { name: "S3Bucket", required: true, spellcheck: "false" });
  const prefix = h("input", { name: "S3KeyPrefix", spellcheck: "false" });
  const fmt = select([["DYNAMODB_JSON", "DynamoDB JSON"], ["ION", "Amazon Ion"], ["CSV", "CSV"]], "DYNAMODB_JSON", { name: "InputFormat" });
  const comp = select([["GZIP", "GZIP"], ["ZSTD", "ZSTD"], ["NONE", "None"]], "GZIP", { name: "InputCompressionType" });
  // CSV's options: the service's delimiters, and the column names when
  // the files have no header line.
  const delim = select([[",", "Comma (,)"], [";", "Semicolon (;)"], [":", "Colon (:)"], ["|", "Pipe (|)"], ["\t", "Tab"], [" ", "Space"]], ",", { name: "Delimiter" });
  const header = h("input", { name: "HeaderList", spellcheck: "false", placeholder: "pk, sk, color" });
  const csv = h("div", { class: "row", hidden: true }, field("CSV delimiter", delim),
    field("CSV header list (optional)", header, "comma-separated column names; empty: each file's first line is its header"));
  fmt.addEventListener("change", () => { csv.hidden = fmt.value !== "CSV"; });
  const name = h("input", { name: "TableName", required: true, spellcheck: "false" });
  const pk = h("input", { name: "pk", required: true, spellcheck: "false" });
  const pkType = select(types, "S", { name: "pkType" });
  const sk = h("input", { name: "sk", spellcheck: "false" });
  const skType = select(types, "S", { name: "skType" });
  const bill = billingEditor();
  const gsi = gsiEditor();
  const sse = sseEditor(false);
  const f = h("form", { class: "card", id: "start-import" }, h("h2", null, "Import from S3 into a new table"),
    h("p", { class: "hint" }, "Reads every object under the prefix of a bucket of the server's ", h("code", null, "[s3]"),
      " section (an AWS export's data/ directory, for one) into a new table (docs/exports.md)."),
    h("div", { class: "row" }, field("S3 bucket", bucket), field("Key prefix", prefix)),
    h("div", { class: "row" }, field("Input format", fmt), field("Compression", comp)), csv,
    h("fieldset", null, h("legend", null, "New table"), field("Table name", name),
      h("div", { class: "row" }, field("Partition key", pk), field("Type", pkType)),
      h("div", { class: "row" }, field("Sort key (optional)", sk), field("Type", skType)),
      gsi.el, h("div", { class: "row" }, bill.field), bill.prov, sse.el),
    h("button", { type: "submit", class: "primary" }, "Start import"));
  const jobBody = h("tbody");
  const body = h("tbody");
  const more = h("div", { class: "pager" });
  clear(main, h("h1", null, "Imports"), f, out, h("h2", null, "Jobs"), jobsTable(jobBody, "Import"),
    h("h2", null, "Imports"),
    h("div", { class: "scroll" }, h("table", { class: "grid", id: "imports" },
      h("thead", null, h("tr", null, ["Import", "Table", "Status", "Started", "Ended", "Imported", "Errors", "Source", "Detail"].map((x) => h("th", { scope: "col" }, x)))), body)),
    more);
  showJobs(jobBody, (j) => j.kind === "import", "No import running.");
  let timer = null;
  // load lists the imports 25 at a time, each described; the first page
  // is read again every 2 seconds while one is running.
  async function load(token) {
    const r = await guard(() => client.call("ListImports", token ? { PageSize: 25, NextToken: token } : { PageSize: 25 }), clear(out));
    if (!r) return;
    if (!token) clear(body);
    const ds = await Promise.all((r.ImportSummaryList || []).map((x) => client.call("DescribeImport", { ImportArn: x.ImportArn })
      .then((d) => d.ImportTableDescription, () => x)));
    let running = false;
    for (const d of ds) {
      if (d.ImportStatus === "IN_PROGRESS") running = true;
      const src = d.S3BucketSource || {};
      body.append(h("tr", { "data-import": d.ImportArn }, h("td", null, d.ImportArn.split("/import/")[1] || d.ImportArn),
        h("td", null, (d.TableArn || "").split("/").pop()),
        h("td", { class: d.ImportStatus === "FAILED" ? "bad" : d.ImportStatus === "COMPLETED" ? "ok" : "" }, d.ImportStatus),
        h("td", null, utc(d.StartTime)), h("td", null, utc(d.EndTime)),
        h("td", null, d.ImportedItemCount == null ? "" : String(d.ImportedItemCount)),
        h("td", null, d.ErrorCount == null ? "" : String(d.ErrorCount)),
        h("td", null, `s3://${src.S3Bucket || ""}/${src.S3KeyPrefix || ""} (${d.InputFormat || ""}${d.InputCompressionType ? ", " + d.InputCompressionType : ""})`),
        h("td", null, d.ImportStatus === "FAILED" ? `${d.FailureCode || ""}: ${d.FailureMessage || ""}` : "")));
    }
    if (!token && !ds.length) body.append(h("tr", null, h("td", { colspan: 9 }, "No imports.")));
    clear(more, r.NextToken ? h("button", { type: "button", onclick: () => load(r.NextToken) }, "More imports") : null);
    clearTimeout(timer);
    if (!token && running) timer = setTimeout(() => { if (main.contains(body)) load(); }, 2000);
  }
  f.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clear(out);
    const defs = attributeTypes();
    const params = { TableName: name.value.trim(), KeySchema: [{ AttributeName: pk.value, KeyType: "HASH" }], ...bill.value() };
    const input = { S3BucketSource: { S3Bucket: bucket.value.trim() }, InputFormat: fmt.value, InputCompressionType: comp.value,
      TableCreationParameters: params };
    try {
      defs.def(pk.value, pkType.value);
      if (sk.value) { defs.def(sk.value, skType.value); params.KeySchema.push({ AttributeName: sk.value, KeyType: "RANGE" }); }
      const g = gsi.value(defs.def, bill.throughput());
      if (g) params.GlobalSecondaryIndexes = g;
      params.AttributeDefinitions = defs.list();
      const spec = sse.value();
      if (spec) params.SSESpecification = spec;
    } catch (e) {
      out.append(errorBox(e));
      return;
    }
    if (prefix.value.trim()) input.S3BucketSource.S3KeyPrefix = prefix.value.trim();
    if (fmt.value === "CSV") {
      const o = { Delimiter: delim.value };
      const cols = header.value.split(",").map((x) => x.trim()).filter(Boolean);
      if (cols.length) o.HeaderList = cols;
      input.InputFormatOptions = { Csv: o };
    }
    const r = await guard(() => client.call("ImportTable", input), out);
    if (!r) return;
    const d = r.ImportTableDescription;
    status(`Import into ${name.value.trim()} ${d.ImportStatus}.`);
    const j = jobOf("import", name.value.trim(), d.ImportArn.split("/import/")[1]);
    j.arn = d.ImportArn;
    pollJobs();
    load();
  });
  load();
}

// ---------- server ----------

function ms(seconds) {
  if (!Number.isFinite(seconds)) return "";
  return seconds < 0.01 ? (seconds * 1000).toFixed(2) + " ms" : seconds < 1 ? (seconds * 1000).toFixed(1) + " ms" : seconds.toFixed(2) + " s";
}

// BACKGROUND are the gauges and counters of background work the server
// page shows when the server exports them.
const BACKGROUND = [
  ["Backup jobs running", "extenddb_backup_jobs_running"],
  ["Backup items written", "extenddb_backup_items_total"],
  ["Backup bytes written", "extenddb_backup_bytes_total", formatBytes],
  ["Index backfills running", "extenddb_index_backfills_running"],
  ["Index backfill progress", "extenddb_index_backfill_progress_ratio", (v) => (100 * v).toFixed(0) + " %"],
  ["TTL backlog (items)", "extenddb_ttl_backlog_items"],
  ["TTL deleted items", "extenddb_ttl_deleted_items_total"],
  ["Point-in-time records shipped", "extenddb_pitr_shipped_records_total"],
  ["Point-in-time shipping errors", "extenddb_pitr_ship_errors_total"],
  ["Stream records written", "extenddb_stream_records_written_total"],
];

// lastTotals keeps the previous scrape's request counts, for the rate.
let lastTotals = null;
let serverTimer = null;

async function serverView() {
  clearTimeout(serverTimer);
  const facts = h("dl", { class: "facts" });
  const ops = h("tbody");
  const bg = h("dl", { class: "facts", id: "background" });
  const lag = h("tbody");
  const running = h("tbody");
  const rate = h("span", { id: "rate" });
  clear(main, h("h1", null, "Server"), facts,
    h("h2", null, "Requests by operation ", rate),
    h("div", { class: "scroll" }, h("table", { class: "grid", id: "ops" },
      h("thead", null, h("tr", null, ["Operation", "Requests", "Errors", "Error types", "p50", "p99", "Mean"].map((x) => h("th", { scope: "col" }, x)))), ops)),
    h("h2", null, "Background work"), bg,
    h("h3", null, "Backup, restore, export and import jobs running"),
    h("div", { class: "scroll" }, h("table", { class: "grid", id: "running-jobs" },
      h("thead", null, h("tr", null, ["Kind", "Account", "Table", "Job", "Phase", "Items", "Bytes"].map((x) => h("th", { scope: "col" }, x)))), running)),
    h("h3", null, "Point-in-time recovery: shipping lag per table"),
    h("div", { class: "scroll" }, h("table", { class: "grid", id: "pitr-lag" },
      h("thead", null, h("tr", null, ["Account", "Table", "Lag"].map((x) => h("th", { scope: "col" }, x)))), lag)),
    h("p", { class: "hint" }, "From ", link("/metrics", "/metrics"), " since the server started; refreshed every 5 seconds."));
  const get = async (path) => {
    try {
      const r = await fetch(path, { cache: "no-store", credentials: "omit" });
      return { ok: r.ok, status: r.status, text: await r.text() };
    } catch (e) { return { ok: false, status: 0, text: e.message }; }
  };
  const [hh, rr, mm] = await Promise.all([get("/health"), get("/ready"), get("/metrics")]);
  const said = (x) => { try { const j = JSON.parse(x.text); return j.status + (j.reason ? ": " + j.reason : ""); } catch { return "HTTP " + x.status; } };
  const fact = (k, v) => facts.append(h("dt", null, k), h("dd", null, v));
  fact("Health", h("span", { class: hh.ok ? "ok" : "bad" }, said(hh)));
  fact("Readiness", h("span", { class: rr.ok ? "ok" : "bad" }, said(rr)));
  if (!mm.ok) {
    ops.append(h("tr", null, h("td", { colspan: 7 }, "Metrics unavailable (HTTP " + mm.status + ").")));
    return;
  }
  const wanted = new Set(["extenddb_build_info", "extenddb_server_info", "extenddb_backup_store_up", "extenddb_pitr_lag_seconds", ...JOB_SERIES, "extenddb_tables", "extenddb_requests_total", "extenddb_request_duration_seconds_sum",
    "extenddb_request_duration_seconds_count", "extenddb_request_duration_seconds_bucket", ...BACKGROUND.map((b) => b[1])]);
  const all = parseMetrics(mm.text, wanted);
  const build = all.find((x) => x.name === "extenddb_build_info");
  if (build) fact("Version", `${build.labels.version} (commit ${build.labels.commit}, ${build.labels.go})`);
  // The backend and the backup store: extenddb_server_info (every
  // backend), else the label of the storage metrics of an older server.
  const info = all.find((x) => x.name === "extenddb_server_info");
  const backends = info ? new Set([info.labels.backend]) : new Set(parseMetrics(mm.text, { has: () => true }).map((x) => x.labels.backend).filter(Boolean));
  if (backends.size) fact("Backend", [...backends].join(", "));
  if (info) {
    const up = all.find((x) => x.name === "extenddb_backup_store_up");
    fact("Backup store", h("span", { id: "backup-store" }, info.labels.backup_store,
      up ? h("span", { class: up.value === 1 ? "ok" : "bad" }, up.value === 1 ? " (reachable)" : " (unreachable or not this catalog's: see readiness)") : null));
  }
  const tables = all.filter((x) => x.name === "extenddb_tables");
  if (tables.length) fact("Tables", String(tables.reduce((a, x) => a + x.value, 0)));

  const by = new Map();
  const row = (op) => by.get(op) || (by.set(op, { n: 0, err: 0, codes: [], sum: 0, count: 0, buckets: [] }), by.get(op));
  for (const x of all) {
    if (!x.name.startsWith("extenddb_request")) continue;
    const r = row(x.labels.operation || "");
    if (x.name === "extenddb_requests_total") {
      // The code label is the error's type; empty on success.
      r.n += x.value;
      if (x.labels.code) { r.err += x.value; r.codes.push(`${x.labels.code} ${x.value}`); }
    } else if (x.name.endsWith("_sum")) r.sum += x.value;
    else if (x.name.endsWith("_count")) r.count += x.value;
    else r.buckets.push([x.labels.le === "+Inf" ? Infinity : Number(x.labels.le), x.value]);
  }
  const now = Date.now();
  const total = [...by.values()].reduce((a, r) => a + r.n, 0);
  if (lastTotals && now > lastTotals.at) clear(rate, `(${((total - lastTotals.n) / ((now - lastTotals.at) / 1000)).toFixed(1)} requests/s)`);
  lastTotals = { n: total, at: now };
  const list = [...by].filter(([, r]) => r.n > 0).sort((a, b) => b[1].n - a[1].n);
  for (const [op, r] of list) {
    r.buckets.sort((a, b) => a[0] - b[0]);
    ops.append(h("tr", null, h("th", { scope: "row" }, op || "(none)"), h("td", null, String(r.n)),
      h("td", null, String(r.err)), h("td", null, r.codes.join(", ")),
      h("td", null, ms(quantile(0.5, r.buckets))), h("td", null, ms(quantile(0.99, r.buckets))),
      h("td", null, r.count ? ms(r.sum / r.count) : "")));
  }
  if (!list.length) ops.append(h("tr", null, h("td", { colspan: 7 }, "No requests yet.")));
  for (const [label, name, fmt] of BACKGROUND) {
    const xs = all.filter((x) => x.name === name);
    if (!xs.length) continue;
    const v = name.endsWith("_ratio") ? Math.min(...xs.map((x) => x.value)) : xs.reduce((a, x) => a + x.value, 0);
    bg.append(h("dt", null, label), h("dd", null, fmt ? fmt(v) : String(v)));
  }
  if (!bg.childElementCount) bg.append(h("dd", null, "None reported."));
  const jobsNow = new Map();
  for (const x of all.filter((x) => JOB_SERIES.includes(x.name))) {
    const k = [x.labels.kind, x.labels.account, x.labels.table, x.labels.job].join("\u0000");
    const j = jobsNow.get(k) || jobsNow.set(k, { labels: x.labels }).get(k);
    j[x.name.slice("extenddb_backup_job_".length)] = x.value;
  }
  for (const j of jobsNow.values()) {
    const l = j.labels;
    running.append(h("tr", null, h("td", null, l.kind), h("td", null, l.account || ""), h("td", null, l.table), h("td", null, l.job), h("td", null, l.phase || ""),
      h("td", null, `${j.items ?? 0}${j.total_items ? " of " + j.total_items : ""}`), h("td", null, formatBytes(j.bytes ?? 0))));
  }
  if (!jobsNow.size) running.append(h("tr", null, h("td", { colspan: 7 }, "None running.")));
  const lags = all.filter((x) => x.name === "extenddb_pitr_lag_seconds").sort((a, b) => b.value - a.value);
  for (const x of lags) {
    lag.append(h("tr", { "data-table": x.labels.table }, h("td", null, x.labels.account), h("th", { scope: "row" }, link("#/table/" + encodeURIComponent(x.labels.table), x.labels.table)),
      h("td", null, x.value.toFixed(1) + " s")));
  }
  if (!lags.length) lag.append(h("tr", null, h("td", { colspan: 3 }, "No table with point-in-time recovery on this server.")));
  // Refreshed in place unless the reader is on a control of the page (a
  // rebuild would take their focus away).
  const again = () => {
    if (!location.hash.startsWith("#/server")) return;
    if (main.contains(document.activeElement) && document.activeElement !== main) serverTimer = setTimeout(again, 5000);
    else serverView();
  };
  serverTimer = setTimeout(again, 5000);
}

start();
