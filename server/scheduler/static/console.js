// The PDN console's own script: live display cards (server-sent events from the scheduler,
// polling when the stream is refused) with what plays now and next, and the editor's line at
// fault. Nothing from elsewhere.
"use strict";
(function () {
  var base = document.body.getAttribute("data-base") || "";

  function time(text) {
    if (!text) return "–";
    var d = new Date(text);
    if (isNaN(d.getTime())) return text;
    var iso = d.toISOString();
    var today = new Date().toISOString().slice(0, 10);
    return iso.slice(0, 10) === today ? iso.slice(11, 19) : iso.slice(0, 10) + " " + iso.slice(11, 16);
  }

  // As the card's template filter writes it (console.py, clock_text).
  function clock(c) {
    if (!c || c["offset-ms"] === null || c["offset-ms"] === undefined) {
      return c && c.source && c.source !== "unknown" ? "offset unknown (" + c.source + ")" : "unknown";
    }
    var ms = c["offset-ms"];
    var text = (ms >= 0 ? "+" : "") + ms + " ms (" + c.source + ")";
    return c.synchronised === false ? text + ", not synchronised" : text;
  }

  function set(card, selector, text) {
    var node = card.querySelector(selector);
    if (node && node.textContent !== text) { node.textContent = text; return true; }
    return false;
  }

  // Each zone's item while a layout splits the screen (the card's template writes the same).
  function zones(card, playing) {
    var box = card.querySelector(".zones");
    if (!box) return false;
    var shown = playing.zones || null;
    box.hidden = !shown;
    set(card, ".layout", playing.layout || "–");
    var list = box.querySelector(".zone-list");
    var text = [];
    var names = shown ? Object.keys(shown) : [];
    names.forEach(function (name) { text.push(name + ": " + (shown[name]["content-item"] || "nothing (idle)")); });
    var now = [];
    for (var i = 0; i < list.children.length; i++) now.push(list.children[i].textContent);
    if (now.join("\n") === text.join("\n")) return false;
    while (list.firstChild) list.removeChild(list.firstChild);
    names.forEach(function (name) {
      var li = document.createElement("li");
      li.setAttribute("data-zone", name);
      var label = document.createElement("span");
      label.className = "zone-name";
      label.textContent = name;
      var item = document.createElement("span");
      item.className = "zone-item";
      item.textContent = shown[name]["content-item"] || "nothing (idle)";
      li.appendChild(label);
      li.appendChild(document.createTextNode(": "));
      li.appendChild(item);
      list.appendChild(li);
    });
    return true;
  }

  function update(d) {
    var cards = document.querySelectorAll(".card");
    var card = null;
    for (var i = 0; i < cards.length; i++) {
      if (cards[i].getAttribute("data-url") === d.display) { card = cards[i]; }
    }
    if (!card) return;
    var playing = d.playing || {};
    var changed = set(card, ".playing", playing["content-item"] || "nothing (idle)");
    set(card, ".since", time(playing.started));
    set(card, ".set", playing.set || "–");
    if (zones(card, playing)) changed = true;
    set(card, ".seen", "last seen " + time(d["last-seen"]));
    var nownext = card.querySelector(".nownext");
    if (nownext) nownext.hidden = !d.now && !d.next;
    ["now", "next"].forEach(function (which) {
      var shown = d[which];
      set(card, "." + which + "-name", shown ? shown.name : "–");
      var thumb = card.querySelector("img." + which + "-thumb");
      if (!thumb) return;
      if (shown && shown.thumbnail) {
        if (thumb.getAttribute("src") !== shown.thumbnail) thumb.setAttribute("src", shown.thumbnail);
        thumb.hidden = false;
      } else { thumb.hidden = true; }
    });
    var state = card.querySelector(".state");
    var label = d.online ? "online" : (d.online === null ? "not seen yet" : "offline");
    if (state.textContent !== label) { state.textContent = label; changed = true; }
    state.className = "state " + (d.online ? "on" : (d.online === null ? "unknown" : "off"));
    var health = card.querySelector(".health");
    health.textContent = d.health.status || "–";
    health.className = "health h-" + (d.health.status || "unknown");
    set(card, ".problem", d.health.problem ? ": " + d.health.problem : "");
    set(card, ".version", d.version || "–");
    set(card, ".rolled-back", d["rolled-back-from"] ? " (rolled back from " + d["rolled-back-from"] + ")" : "");
    set(card, ".clock", clock(d.clock));
    var img = card.querySelector("img.thumb");
    if (d.thumbnail.available && img) {
      var src = base + "/thumbnail?display=" + encodeURIComponent(d.display) +
        "&t=" + encodeURIComponent(d.thumbnail.taken || "");
      if (img.getAttribute("src") !== src) { img.setAttribute("src", src); img.hidden = false; }
      card.querySelector(".nothumb").hidden = true;
    }
    if (changed) {
      card.classList.remove("flash");
      void card.offsetWidth;
      card.classList.add("flash");
    }
  }

  function live() {
    var marker = document.getElementById("live");
    if (!document.querySelector(".card")) return;
    var polling = null;
    function poll() {
      fetch(base + "/fleet.json", { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (body) { body.displays.forEach(update); })
        .catch(function () {});
    }
    if (!window.EventSource) { polling = setInterval(poll, 5000); return; }
    var source = new EventSource(base + "/events");
    source.addEventListener("display", function (event) { update(JSON.parse(event.data)); });
    source.onopen = function () { if (marker) marker.classList.add("on"); };
    source.onerror = function () {
      if (marker) marker.classList.remove("on");
      if (source.readyState === EventSource.CLOSED && polling === null) {
        polling = setInterval(poll, 5000);  // the stream was refused: poll instead
      }
    };
  }

  function refreshButtons() {
    document.querySelectorAll("form.refresh").forEach(function (form) {
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        var button = form.querySelector("button");
        button.disabled = true;
        fetch(form.action, { method: "POST", credentials: "same-origin",
                             headers: { "X-Requested-With": "console" } })
          .finally(function () { button.disabled = false; });
      });
    });
  }

  function faultLine() {
    var area = document.getElementById("cds");
    if (!area || !area.getAttribute("data-fault-line")) return;
    var line = parseInt(area.getAttribute("data-fault-line"), 10);
    var lines = area.value.split("\n");
    var start = 0;
    for (var i = 0; i < line - 1 && i < lines.length; i++) start += lines[i].length + 1;
    var end = start + (lines[line - 1] || "").length;
    area.focus();
    area.setSelectionRange(start, end);
    var height = area.scrollHeight / Math.max(lines.length, 1);
    area.scrollTop = Math.max(0, (line - 4) * height);
  }

  document.addEventListener("DOMContentLoaded", function () {
    live();
    refreshButtons();
    faultLine();
  });
})();
