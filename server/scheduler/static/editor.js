// The console's playlist editor: entries added from the library (search, type, tag) or as web
// links; moved by drag and drop or with Alt+Up/Alt+Down (or the buttons); each entry's duration,
// dates, times of day, days and transition edited in place; a strip of thumbnails with the
// total length; a preview that plays it here at speed; saved with PUT /x/playlists/<id>
// through the console. A refused save keeps every edit on the page.
"use strict";
(function () {
  var base = document.body.getAttribute("data-base") || "";
  var DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];
  var DEFAULT_SECONDS = 10;
  var state, media = {}, entries = [], editor, dragged = null;

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function labelled(text, control) {
    var label = el("label"); label.appendChild(document.createTextNode(text + " "));
    label.appendChild(control); return label;
  }
  function length(s) {
    s = Math.round(s * 10) / 10;
    if (s < 60) return s + " s";
    var m = Math.floor(s / 60), r = Math.round(s - 60 * m);
    return m + " min " + (r < 10 ? "0" : "") + r + " s";
  }
  function item(entry) { return entry.media ? media[entry.media] : null; }
  function nameOf(entry) {
    var found = item(entry);
    if (found) return found.name;
    if (entry.media) return "missing item " + entry.media.slice(0, 8);
    try { return new URL(entry.link).host + new URL(entry.link).pathname.replace(/\/$/, ""); }
    catch (e) { return entry.link; }
  }
  function seconds(entry) {
    if (entry.duration !== undefined && entry.duration !== null && entry.duration !== "") return Number(entry.duration);
    var found = item(entry);
    if (found && found.type === "video" && found.duration) return found.duration;
    return DEFAULT_SECONDS;
  }
  function thumbOf(entry) {
    var found = item(entry);
    if (found && (found.type === "image" || found.type === "video")) {
      var img = el("img", "ethumb"); img.alt = "";
      img.src = base + "/x/media/" + found.sha256 + "/thumbnail";
      return img;
    }
    return el("span", "ethumb none", found ? found.type : "link");
  }

  function windowsText(ws) {
    return (ws || []).map(function (w) { return w.start + "-" + w.end; }).join(", ");
  }
  function parseWindows(text) {
    var out = [];
    var parts = text.split(",").map(function (p) { return p.trim(); }).filter(Boolean);
    for (var i = 0; i < parts.length; i++) {
      var m = /^(\d{1,2}:\d{2})\s*[-–]\s*(\d{1,2}:\d{2})$/.exec(parts[i]);
      if (!m) return null;
      var pad = function (t) { return t.length === 4 ? "0" + t : t; };
      out.push({ start: pad(m[1]), end: pad(m[2]) });
    }
    return out;
  }

  function move(from, to, focus) {
    if (to < 0 || to >= entries.length || from === to) return;
    var moved = entries.splice(from, 1)[0];
    entries.splice(to, 0, moved);
    render();
    if (focus) document.querySelectorAll("#entries > li")[to].focus();
    say("Moved " + nameOf(moved) + " to place " + (to + 1) + " of " + entries.length + ".");
  }
  function say(text) { document.getElementById("total").setAttribute("data-said", text); }

  function entryRow(entry, index) {
    var name = nameOf(entry);
    var li = el("li", "entry");
    li.tabIndex = 0; li.draggable = true;
    li.setAttribute("data-index", String(index));
    li.setAttribute("aria-label", (index + 1) + ". " + name + ", " + length(seconds(entry)));
    var head = el("div", "entry-head");
    head.appendChild(thumbOf(entry));
    head.appendChild(el("span", "name", name));
    var buttons = el("span", "entry-buttons");
    [["↑", "Move " + name + " up", -1], ["↓", "Move " + name + " down", 1]].forEach(function (b) {
      var button = el("button", "secondary move", b[0]); button.type = "button";
      button.setAttribute("aria-label", b[1]); button.title = b[1];
      button.addEventListener("click", function () { move(index, index + b[2], false); });
      buttons.appendChild(button);
    });
    var remove = el("button", "secondary remove", "✕"); remove.type = "button";
    remove.setAttribute("aria-label", "Remove " + name); remove.title = "Remove " + name;
    remove.addEventListener("click", function () { entries.splice(index, 1); render(); });
    buttons.appendChild(remove);
    head.appendChild(buttons);
    li.appendChild(head);

    var fields = el("div", "entry-fields");
    var duration = el("input", "duration"); duration.type = "number"; duration.min = "0.5"; duration.step = "0.5";
    duration.value = entry.duration === undefined || entry.duration === null ? "" : entry.duration;
    duration.placeholder = String(seconds(Object.assign({}, entry, { duration: null })));
    duration.addEventListener("input", function () {
      entry.duration = duration.value === "" ? null : Number(duration.value); summary();
      li.setAttribute("aria-label", (index + 1) + ". " + name + ", " + length(seconds(entry)));
    });
    fields.appendChild(labelled("Seconds", duration));
    [["from", "From"], ["until", "Until"]].forEach(function (d) {
      var input = el("input", d[0]); input.type = "date"; input.value = entry[d[0]] || "";
      input.addEventListener("input", function () { entry[d[0]] = input.value || null; });
      fields.appendChild(labelled(d[1], input));
    });
    var windows = el("input", "windows"); windows.type = "text"; windows.placeholder = "08:00-12:00, 14:00-18:00";
    windows.value = windowsText(entry.windows);
    windows.addEventListener("input", function () { entry.windowsText = windows.value; });
    fields.appendChild(labelled("Times of day", windows));
    var transition = el("select", "transition");
    state.transitions.forEach(function (t) {
      var o = el("option", "", t === "crossfade" ? "cross-fade" : t); o.value = t; transition.appendChild(o);
    });
    transition.value = entry.transition || "crossfade";
    transition.addEventListener("change", function () { entry.transition = transition.value; });
    fields.appendChild(labelled("Transition", transition));
    var days = el("fieldset", "days"); days.appendChild(el("legend", "", "Days (none: every day)"));
    DAYS.forEach(function (day) {
      var box = el("input"); box.type = "checkbox"; box.checked = (entry.days || []).indexOf(day) >= 0;
      box.addEventListener("change", function () {
        entry.days = DAYS.filter(function (d, i) { return days.querySelectorAll("input")[i].checked; });
      });
      var label = el("label", "check"); label.appendChild(box);
      label.appendChild(document.createTextNode(day.slice(0, 3)));
      label.title = day;
      days.appendChild(label);
    });
    fields.appendChild(days);
    li.appendChild(fields);

    li.addEventListener("keydown", function (e) {
      if (e.target !== li || !e.altKey) return;
      if (e.key === "ArrowUp") { e.preventDefault(); move(index, index - 1, true); }
      if (e.key === "ArrowDown") { e.preventDefault(); move(index, index + 1, true); }
    });
    li.addEventListener("dragstart", function (e) {
      dragged = index; li.classList.add("dragging");
      e.dataTransfer.effectAllowed = "move"; e.dataTransfer.setData("text/plain", String(index));
    });
    li.addEventListener("dragend", function () { li.classList.remove("dragging"); dragged = null; });
    li.addEventListener("dragover", function (e) { if (dragged !== null) { e.preventDefault(); li.classList.add("target"); } });
    li.addEventListener("dragleave", function () { li.classList.remove("target"); });
    li.addEventListener("drop", function (e) {
      e.preventDefault(); li.classList.remove("target");
      var from = dragged !== null ? dragged : parseInt(e.dataTransfer.getData("text/plain"), 10);
      if (!isNaN(from)) move(from, index, false);
    });
    return li;
  }

  function summary() {
    var strip = document.getElementById("strip");
    strip.innerHTML = "";
    var total = 0;
    entries.forEach(function (entry) {
      var s = seconds(entry); total += s;
      var cell = el("span", "cell"); cell.title = nameOf(entry) + " · " + length(s);
      cell.style.flexGrow = String(Math.max(1, s));
      cell.appendChild(thumbOf(entry));
      cell.appendChild(el("span", "small", length(s)));
      strip.appendChild(cell);
    });
    document.getElementById("total").textContent = entries.length + " item" +
      (entries.length === 1 ? "" : "s") + " · " + length(total) + " in all";
    document.getElementById("no-entries").hidden = entries.length > 0;
  }

  function render() {
    var list = document.getElementById("entries");
    list.innerHTML = "";
    entries.forEach(function (entry, index) { list.appendChild(entryRow(entry, index)); });
    summary();
  }

  function picker() {
    var list = document.getElementById("pick");
    var words = document.getElementById("pick-search").value.trim().toLowerCase();
    var type = document.getElementById("pick-type").value;
    var tag = document.getElementById("pick-tag").value;
    list.innerHTML = "";
    state.media.forEach(function (m) {
      var hay = (m.name + " " + m.tags.join(" ")).toLowerCase();
      if ((type && m.type !== type) || (tag && m.tags.indexOf(tag) < 0) || (words && hay.indexOf(words) < 0)) return;
      var li = el("li", "pick-item");
      li.appendChild(thumbOf(m.type === "link" ? { link: m.link } : { media: m.sha256 }));
      li.appendChild(el("span", "name", m.name));
      li.appendChild(el("span", "small", m.type + (m.duration ? " · " + length(m.duration) : "")));
      var add = el("button", "secondary add", "Add"); add.type = "button";
      add.setAttribute("aria-label", "Add " + m.name);
      add.addEventListener("click", function () {
        entries.push(m.type === "link" ? { link: m.link, transition: "crossfade" } : { media: m.sha256, transition: "crossfade" });
        render();
      });
      li.appendChild(add);
      list.appendChild(li);
    });
    if (!list.children.length) list.appendChild(el("li", "small", state.media.length ? "Nothing matches." : "The library is empty: upload on the Library page."));
  }

  function body() {
    var items = [];
    for (var i = 0; i < entries.length; i++) {
      var e = entries[i], out = e.media ? { media: e.media } : { link: e.link };
      if (e.duration !== undefined && e.duration !== null && e.duration !== "") out.duration = Number(e.duration);
      if (e.from) out.from = e.from;
      if (e.until) out.until = e.until;
      var windows = e.windowsText !== undefined ? parseWindows(e.windowsText) : (e.windows || []);
      if (windows === null) throw new Error("Item " + (i + 1) + " (" + nameOf(e) + "): write its times of day as 08:00-12:00, 14:00-18:00.");
      if (windows.length) out.windows = windows;
      if (e.days && e.days.length) out.days = e.days;
      out.transition = e.transition || "crossfade";
      items.push(out);
    }
    var result = { items: items, order: document.getElementById("pl-order").value,
                   priority: document.getElementById("pl-priority").value };
    var name = document.getElementById("pl-name").value.trim();
    if (name) result.name = name;
    return result;
  }

  function save() {
    var answer = document.getElementById("save-answer");
    var sent;
    try { sent = body(); } catch (e) { answer.className = "error"; answer.textContent = "Not saved: " + e.message; return; }
    var button = document.getElementById("save");
    button.disabled = true;
    fetch(base + "/x/playlists/" + encodeURIComponent(state.id), {
      method: "PUT", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Requested-With": "console" },
      body: JSON.stringify(sent)
    }).then(function (r) {
      return r.text().then(function (t) { var b = null; try { b = JSON.parse(t); } catch (e) { /* not JSON */ } return { status: r.status, body: b }; });
    }).then(function (a) {
      button.disabled = false;
      if (a.status === 201) { location.href = location.pathname + "?saved=1"; return; }
      if (a.status === 200) {
        answer.className = "ok";
        answer.textContent = "Saved: every display it is assigned to gets it now (" + length(a.body.duration) + " in all).";
        loadCds(true);
        return;
      }
      answer.className = "error";
      var why = a.body && a.body.message ? a.body.message : "the scheduler answered HTTP " + a.status;
      if (a.status === 401) why = "the console session has ended: sign in again in another tab, then save again";
      var where = a.body && a.body.field ? /items\[(\d+)\]/.exec(a.body.field) : null;
      answer.textContent = "Not saved: " + why + (where ? " (item " + (Number(where[1]) + 1) + ")" : "") +
        ". Your edits are still here.";
    }, function () {
      button.disabled = false;
      answer.className = "error";
      answer.textContent = "Not saved: the scheduler did not answer. Your edits are still here; save again when it is back.";
    });
  }

  function loadCds(force) {
    var pre = document.getElementById("cds");
    var box = document.getElementById("cds-box");
    if (!pre || (!box.open && !force)) return;
    fetch(pre.getAttribute("data-src"), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : "Not saved yet."; })
      .then(function (text) { pre.textContent = text; });
  }

  var playing = null;
  function preview() {
    var stage = document.getElementById("stage");
    var now = document.getElementById("preview-now");
    var button = document.getElementById("play");
    if (playing) { clearTimeout(playing); playing = null; stage.innerHTML = ""; now.textContent = ""; button.textContent = "Preview"; return; }
    if (!entries.length) return;
    button.textContent = "Stop the preview";
    var index = 0;
    function show() {
      var entry = entries[index % entries.length], found = item(entry), s = seconds(entry);
      stage.innerHTML = "";
      var node;
      if (found && found.type === "image") { node = el("img"); node.alt = found.name; node.src = base + found.url; }
      else if (found && found.type === "video") {
        node = el("video"); node.muted = true; node.autoplay = true; node.src = base + found.url;
        node.setAttribute("aria-label", found.name);
      } else {
        node = el("iframe"); node.title = nameOf(entry); node.setAttribute("sandbox", "allow-scripts");
        node.src = found && found.type === "page" ? base + found.url : (found ? found.link : entry.link);
      }
      node.className = "stage-item";
      stage.appendChild(node);
      stage.setAttribute("data-index", String(index % entries.length));
      now.textContent = (index % entries.length + 1) + " of " + entries.length + ": " + nameOf(entry) + " (" + length(s) + ")";
      index += 1;
      playing = setTimeout(show, s * 1000);
    }
    show();
  }

  document.addEventListener("DOMContentLoaded", function () {
    editor = document.getElementById("editor");
    if (!editor) return;
    state = JSON.parse(document.getElementById("state").textContent);
    state.media.forEach(function (m) { media[m.sha256] = m; });
    entries = state.playlist.items.map(function (e) { return Object.assign({}, e); });
    document.getElementById("pl-order").value = state.playlist.order;
    document.getElementById("pl-priority").value = state.playlist.priority;
    document.getElementById("pl-name").value = state.playlist.name || "";
    var tags = {};
    state.media.forEach(function (m) { m.tags.forEach(function (t) { tags[t] = 1; }); });
    var tagSelect = document.getElementById("pick-tag");
    Object.keys(tags).sort().forEach(function (t) { var o = el("option", "", t); o.value = t; tagSelect.appendChild(o); });
    ["pick-search", "pick-type", "pick-tag"].forEach(function (id) {
      document.getElementById(id).addEventListener("input", picker);
      document.getElementById(id).addEventListener("change", picker);
    });
    document.getElementById("add-web").addEventListener("submit", function (e) {
      e.preventDefault();
      var url = document.getElementById("web-url");
      entries.push({ link: url.value.trim(), transition: "crossfade" });
      url.value = ""; render();
    });
    document.getElementById("save").addEventListener("click", save);
    document.getElementById("play").addEventListener("click", preview);
    var box = document.getElementById("cds-box");
    if (box) box.addEventListener("toggle", function () { loadCds(false); });
    if (/[?&]saved=1/.test(location.search)) {
      var answer = document.getElementById("save-answer");
      answer.className = "ok"; answer.textContent = "Saved: assign it to displays below.";
    }
    picker(); render();
  });
})();
