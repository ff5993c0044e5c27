/* common.js - the first part of the page's script: the model unpacked
 * (#cmt-data, its shape: src/cli/views/html_model.c) and the helpers every view
 * uses.  The Makefile (HTML_JS) joins common.js, timeline.js, flame.js,
 * sites.js, tensors.js, postmortem.js and page.js, in that order, into the one script
 * the page inlines; this file opens the closure they all share and page.js
 * closes it, so they are fragments of one function, not separate scripts.
 * Plain DOM and SVG, no library: a flame graph is rectangles and a timeline
 * is stacked step areas, both simpler written than bent out of a charting
 * package.  window.cumemtrace exposes the model and the views for tests. */
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('cmt-data').textContent);
  var FR = D.frames;
  var NS = 'http://www.w3.org/2000/svg';
  var main = document.getElementById('main');
  var tip = document.getElementById('tip');
  var PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948',
                 '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];
  var OTHER = '#d0d7de';

  /* An element (h: HTML, s: SVG) with its attributes and text, added to parent. */
  function made(e, attrs, parent, text) {
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text != null) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function h(tag, attrs, parent, text) { return made(document.createElement(tag), attrs, parent, text); }
  function s(tag, attrs, parent, text) { return made(document.createElementNS(NS, tag), attrs, parent, text); }
  function bytes(b) {
    if (b == null) return '?';
    var neg = b < 0, v = Math.abs(b), u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'], i = 0;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    var t = i === 0 ? v + ' B' : v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2) + ' ' + u[i];
    return (neg ? '-' : '') + t;
  }
  function sbytes(b) { return (b > 0 ? '+' : '') + bytes(b); }
  function dur(ns) {
    if (ns == null) return '?';
    if (ns < 1e3) return ns + ' ns';
    if (ns < 1e6) return (ns / 1e3).toFixed(1) + ' \u00b5s';
    if (ns < 1e9) return (ns / 1e6).toFixed(1) + ' ms';
    return (ns / 1e9).toFixed(2) + ' s';
  }
  /* Labels drawn inside a box (a flame-graph frame, a range's bar, a gap,
   * a segment's row): measured in the font report.css gives them (on a
   * canvas, which lays out nothing) and cut with an ellipsis to the box,
   * never past it - a fixed width per character overflowed wide letters.
   * A cut label keeps its full text in a tooltip (<title>) and data-full;
   * each carries its box's width in data-box, which the page tests hold
   * the rendered width to. */
  var FONT_LABEL = '11px "DejaVu Sans", sans-serif', FONT_RANGE = '9px "DejaVu Sans", sans-serif',
      FONT_MONO = '12px "DejaVu Sans Mono", monospace';
  var measurer = null, measured = new Map();
  function textWidth(str, font) {
    if (!measurer) measurer = document.createElement('canvas').getContext('2d');
    var key = font + '\n' + str, w = measured.get(key);
    if (w === undefined) {
      measurer.font = font;
      w = measurer.measureText(str).width;
      if (measured.size < 200000) measured.set(key, w);
    }
    return w;
  }
  /* str's first n characters and an ellipsis (middle: its ends around
   * one), never half of a surrogate pair. */
  function cutText(str, n, middle) {
    function head(k) {
      var c = str.charCodeAt(k - 1);
      return str.slice(0, c >= 0xd800 && c < 0xdc00 ? k - 1 : k);
    }
    if (!middle) return head(n) + '\u2026';
    var a = Math.ceil(n / 2), b = str.length - (n - a), c = str.charCodeAt(b);
    return head(a) + '\u2026' + str.slice(c >= 0xdc00 && c < 0xe000 ? b + 1 : b);
  }
  /* The longest cut of str that fits box pixels ('' when not even one
   * character does). */
  function elide(str, box, font, middle) {
    if (textWidth(str, font) <= box) return str;
    var lo = 0, hi = str.length - 1;
    while (lo < hi) {
      var mid = (lo + hi + 1) >> 1;
      if (textWidth(cutText(str, mid, middle), font) <= box) lo = mid; else hi = mid - 1;
    }
    return lo > 0 ? cutText(str, lo, middle) : '';
  }
  /* A text element of str fitted to box pixels (opt.middle: cut in the
   * middle; opt.whole: drawn whole or not at all, for a number); null when
   * nothing fits. */
  function boxLabel(parent, attrs, str, box, font, opt) {
    opt = opt || {};
    var shown = opt.whole ? (textWidth(str, font) <= box ? str : '') : elide(str, box, font, opt.middle);
    if (!shown) return null;
    attrs['data-box'] = box.toFixed(1);
    attrs['class'] = (attrs['class'] ? attrs['class'] + ' ' : '') + 'boxed';
    var t = s('text', attrs, parent, shown);
    if (shown !== str) {
      t.setAttribute('data-full', str);
      s('title', {}, t, str);
    }
    return t;
  }
  function color(site) { return site < 0 ? OTHER : PALETTE[site % PALETTE.length]; }
  function showTip(ev, text) {
    tip.textContent = text;
    tip.hidden = false;
    var x = ev.clientX + 14, y = ev.clientY + 14;
    if (x + 420 > window.innerWidth) x = Math.max(0, ev.clientX - 430);
    tip.style.left = x + 'px';
    tip.style.top = y + 'px';
  }
  function hideTip() { tip.hidden = true; }
  /* text as the tooltip over e */
  function tipOn(e, text) {
    e.addEventListener('mousemove', function (ev) { showTip(ev, text); });
    e.addEventListener('mouseleave', hideTip);
  }
  function widthOf(e) { return Math.max(480, Math.min(1400, e.clientWidth - 28)); }
  function procName(f) {
    return (f.exe || '?') + ' pid ' + f.pid + (f.rank != null ? ' rank ' + f.rank : '');
  }
  /* Python frames of a stack, innermost first, as "file:line function". */
  function stackLines(file, st, max) {
    var sk = stack(file, st);
    if (!sk) return [];
    var out = [], fr = sk[1];
    for (var i = 0; i < fr.length && out.length < max; i++)
      if (FR[fr[i]][1] === 1) out.push('  ' + FR[fr[i]][0]);
    return out;
  }
  /* The model's site table is by column (html_model.c write_sites). */
  function siteCount(file) { return file.sites.stack.length; }
  function siteLabel(file, i) { return file.labels[file.sites.label[i]]; }
  function siteStack(file, i) { return file.sites.stack[i]; }
  function site(file, i) {
    var c = file.sites;
    return { label: siteLabel(file, i), stack: c.stack[i], at_peak: c.at_peak ? c.at_peak[i] : null,
             live: c.live ? c.live[i] : null, oom: c.oom ? c.oom[i] : null, allocs: c.allocs ? c.allocs[i] : null, frees: c.frees ? c.frees[i] : null,
             alloc_bytes: c.alloc_bytes ? c.alloc_bytes[i] : null, kinds: c.kinds[i] };
  }
  /* ---------------- the model, unpacked ---------------- */

  var B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/', DIGIT = [];
  for (var di = 0; di < 64; di++) DIGIT[B64.charCodeAt(di)] = di;
  /* A file's stacks stay one base-64 string (html_model.c write_stacks):
   * a frame is decoded where it is read, by stepKey for the flame graph and
   * by stack() for the few stacks a view prints, never all 2 million of a
   * 100 000-stack file at once.  Entry points get their flame-graph key. */
  var ENTRY_ID = new Map(), ENTRY_NAME = [];
  function entryKey(name) {
    var id = ENTRY_ID.get(name);
    if (id === undefined) { id = ENTRY_NAME.length; ENTRY_NAME.push(name); ENTRY_ID.set(name, id); }
    return -2 - id;
  }
  function stacksOf(file) {
    if (file.decoded) return file.decoded;
    var len = file.stack_len, n = len.length, off = new Int32Array(n + 1), tot = 0, i;
    for (i = 0; i < n; i++) { off[i] = tot; tot += len[i]; }
    off[n] = tot;
    /* entry "" (the tensor model's stacks, html.h): no entry point, key 0 */
    var keys = file.stack_entries.map(function (e) { return e === '' ? 0 : entryKey(e); });
    var ent = new Int32Array(n);
    for (i = 0; i < n; i++) ent[i] = keys[file.stack_entry[i]];
    file.decoded = { n: n, off: off, ent: ent, str: file.stack_frames, w: file.frame_width };
    return file.decoded;
  }
  function frameAt(S, k) {
    for (var v = 0, c = k * S.w, e = c + S.w; c < e; c++) v = v * 64 + DIGIT[S.str.charCodeAt(c)];
    return v;
  }
  /* [entry point, frame indices innermost first], or null for no stack. */
  function stack(file, st) {
    if (st == null || st < 0 || st >= file.stack_len.length) return null;
    var S = stacksOf(file), a = S.off[st], fr = new Array(S.off[st + 1] - a);
    for (var i = 0; i < fr.length; i++) fr[i] = frameAt(S, a + i);
    return [file.stack_entries[file.stack_entry[st]], fr];
  }
  /* The callers of a stack's label frame, as frames.c's frames_callers
   * prints them: the frame that names the site is the innermost Python
   * frame, else the innermost named one, else the innermost non-marker;
   * unnamed native frames and process start-up are skipped. */
  function startup(f) { return /^(libc\.so|ld-linux)/.test(f[2]) || /!_start$/.test(f[2]); }
  function callers(file, st, max) {
    var sk = stack(file, st);
    if (!sk) return '';
    var fr = sk[1], pos = -1, i;
    for (i = 0; i < fr.length && pos < 0; i++) if (FR[fr[i]][1] === 1) pos = i;
    for (i = 0; i < fr.length && pos < 0; i++) if (FR[fr[i]][3]) pos = i;
    for (i = 0; i < fr.length && pos < 0; i++) if (FR[fr[i]][1] !== 2) pos = i;
    if (pos < 0) return '';
    var out = [];
    for (i = pos + 1; i < fr.length && out.length < max; i++) {
      var f = FR[fr[i]];
      if (f[1] === 0 && (!f[3] || startup(f))) continue;
      out.push('< ' + f[0]);
    }
    return out.join(' ');
  }
  /* Worked out for the rows and bands drawn, not for all 100 000 sites. */
  function siteCallers(file, i) {
    var c = file.callers || (file.callers = []);
    if (c[i] == null) c[i] = callers(file, siteStack(file, i), 4);
    return c[i];
  }
  performance.mark('cmt-parsed');

  function section(id, title) {
    var sec = h('section', { id: id }, main);
    h('h2', {}, sec, title);
    return sec;
  }

