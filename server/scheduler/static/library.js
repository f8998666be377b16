// The console's library: uploads (drag and drop or a picker, one XMLHttpRequest per file with
// its progress), web links, filters, and an item's delete (409 names its playlists; a forced
// delete behind a confirmation). Everything goes to the scheduler's API through the console.
"use strict";
(function () {
  var base = document.body.getAttribute("data-base") || "";
  var HEADER = { "X-Requested-With": "console" };

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function message(status, body, fallback) {
    if (body && body.message) return body.message;
    if (status === 0) return "The scheduler did not answer: check that it runs, then try again.";
    if (status === 401) return "The console session has ended: reload the page and sign in.";
    return fallback + " (HTTP " + status + ")";
  }

  function parse(text) {
    try { return JSON.parse(text); } catch (e) { return null; }
  }

  // The items' grid, fetched again after uploads (the upload rows stay as they are).
  function refreshItems() {
    fetch(location.pathname, { credentials: "same-origin" })
      .then(function (r) { return r.text(); })
      .then(function (html) {
        var page = new DOMParser().parseFromString(html, "text/html");
        ["items", "tag-filter", "count", "usage"].forEach(function (id) {
          var fresh = page.getElementById(id), old = document.getElementById(id);
          if (fresh && old) {
            var value = old.value;
            old.innerHTML = fresh.innerHTML;
            if (value !== undefined) old.value = value;
          }
        });
        var empty = document.getElementById("empty");
        if (empty && document.querySelector("#items .item")) empty.hidden = true;
        filter();
      });
  }

  var pending = 0;
  function upload(file) {
    var list = document.getElementById("uploads");
    var row = el("li", "upload-row");
    row.setAttribute("data-name", file.name);
    var name = el("span", "name", file.name);
    var bar = el("progress");
    bar.max = file.size || 1;
    bar.value = 0;
    bar.setAttribute("aria-label", "Upload of " + file.name);
    var answer = el("span", "answer small", "waiting…");
    row.appendChild(name); row.appendChild(bar); row.appendChild(answer);
    list.appendChild(row);
    var tags = document.getElementById("upload-tags").value;
    var xhr = new XMLHttpRequest();
    xhr.open("POST", base + "/x/media");
    xhr.setRequestHeader("X-Filename", encodeURIComponent(file.name));
    xhr.setRequestHeader("X-Requested-With", "console");
    if (tags.trim()) xhr.setRequestHeader("X-Tags", tags);
    xhr.upload.onprogress = function (e) {
      if (!e.lengthComputable) return;
      bar.max = e.total; bar.value = e.loaded;
      answer.textContent = Math.round(100 * e.loaded / e.total) + " %";
    };
    xhr.upload.onload = function () { answer.textContent = "checking…"; };
    pending += 1;
    xhr.onloadend = function () {
      pending -= 1;
      var body = parse(xhr.responseText);
      bar.value = bar.max;
      if (xhr.status === 201 || xhr.status === 200) {
        row.className = "upload-row done";
        answer.textContent = xhr.status === 201 ? "new: stored" : "already stored (as " + body.name + ")";
        (body.warnings || []).forEach(function (w) { row.appendChild(el("span", "warn small", w)); });
      } else {
        row.className = "upload-row failed";
        answer.textContent = "refused: " + message(xhr.status, body, "the upload failed") +
          " The file stays on your computer: fix it and drop it again.";
      }
      row.setAttribute("data-status", String(xhr.status));
      if (pending === 0) refreshItems();
    };
    xhr.send(file);
  }

  function uploads() {
    var drop = document.getElementById("drop");
    var picker = document.getElementById("files");
    if (!drop || !picker) return;
    picker.addEventListener("change", function () {
      Array.prototype.forEach.call(picker.files, upload);
      picker.value = "";
    });
    ["dragenter", "dragover"].forEach(function (type) {
      drop.addEventListener(type, function (e) { e.preventDefault(); drop.classList.add("over"); });
    });
    ["dragleave", "drop"].forEach(function (type) {
      drop.addEventListener(type, function () { drop.classList.remove("over"); });
    });
    drop.addEventListener("drop", function (e) {
      e.preventDefault();
      Array.prototype.forEach.call(e.dataTransfer.files, upload);
    });
  }

  function links() {
    var form = document.getElementById("add-link");
    if (!form) return;
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      var answer = document.getElementById("link-answer");
      var name = document.getElementById("link-name").value.trim();
      var url = document.getElementById("link-url").value.trim();
      fetch(base + "/x/media", {
        method: "POST", credentials: "same-origin",
        headers: Object.assign({ "Content-Type": "application/json" }, HEADER),
        body: JSON.stringify({ link: url, name: name })
      }).then(function (r) {
        return r.text().then(function (t) { return { status: r.status, body: parse(t) }; });
      }).then(function (a) {
        if (a.status === 200 || a.status === 201) {
          answer.className = "ok";
          answer.textContent = (a.status === 201 ? "Added: " : "Already in the library: ") + a.body.name;
          form.reset();
          refreshItems();
        } else {
          answer.className = "error";
          answer.textContent = "Not added: " + message(a.status, a.body, "the link was refused");
        }
      }, function () {
        answer.className = "error";
        answer.textContent = message(0, null, "");
      });
    });
  }

  function filter() {
    var search = document.getElementById("search");
    if (!search) return;
    var words = search.value.trim().toLowerCase();
    var type = document.getElementById("type-filter").value;
    var tag = document.getElementById("tag-filter").value.toLowerCase();
    var shown = 0;
    document.querySelectorAll("#items .item").forEach(function (item) {
      var tags = item.getAttribute("data-tags").split(",");
      var ok = (!type || item.getAttribute("data-type") === type) &&
        (!tag || tags.indexOf(tag) >= 0) &&
        (!words || item.getAttribute("data-name").indexOf(words) >= 0 ||
         item.getAttribute("data-tags").indexOf(words) >= 0);
      item.hidden = !ok;
      if (ok) shown += 1;
    });
    var count = document.getElementById("count");
    if (count) count.textContent = "(" + shown + ")";
  }

  function filters() {
    ["search", "type-filter", "tag-filter"].forEach(function (id) {
      var node = document.getElementById(id);
      if (node) { node.addEventListener("input", filter); node.addEventListener("change", filter); }
    });
  }

  function deletion() {
    var box = document.getElementById("delete-box");
    if (!box) return;
    var sha = box.getAttribute("data-sha");
    var answer = document.getElementById("delete-answer");
    var forceBox = document.getElementById("force-box");
    var confirm = document.getElementById("force-confirm");
    var forced = document.getElementById("force-delete");
    function remove(force) {
      fetch(base + "/x/media/" + sha + (force ? "?force=1" : ""), {
        method: "DELETE", credentials: "same-origin", headers: HEADER
      }).then(function (r) {
        return r.text().then(function (t) { return { status: r.status, body: parse(t) }; });
      }).then(function (a) {
        if (a.status === 204) { location.href = box.getAttribute("data-back"); return; }
        answer.className = "error";
        if (a.status === 409 && a.body && a.body.playlists) {
          answer.textContent = "Not deleted: it is in the playlist" +
            (a.body.playlists.length > 1 ? "s " : " ") + a.body.playlists.join(", ") +
            (a.body.playlists.length > 1 ? ". Take it out of them in their editors"
                                         : ". Take it out in its editor") +
            ", or delete it anyway below.";
          document.getElementById("force-list").textContent = a.body.playlists.join(", ");
          forceBox.hidden = false;
        } else {
          answer.textContent = "Not deleted: " + message(a.status, a.body, "the delete failed");
        }
      }, function () { answer.className = "error"; answer.textContent = message(0, null, ""); });
    }
    document.getElementById("delete").addEventListener("click", function () { remove(false); });
    confirm.addEventListener("change", function () { forced.disabled = !confirm.checked; });
    forced.addEventListener("click", function () { if (confirm.checked) remove(true); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    uploads(); links(); filters(); deletion();
  });
})();
