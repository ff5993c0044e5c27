  /* page.js - the last part of the script: several processes, the diff
   * views and the page itself; it closes common.js's closure. */
  /* ---------------- several processes ---------------- */

  function drawRanks(files, pick, onPick) {
    /* one process's OOM and exit files are one process: count pids per host */
    var procs = {};
    files.forEach(function (f) { procs[(f.host || '') + '\u0000' + f.pid] = 1; });
    var np = Object.keys(procs).length;
    var sec = section('ranks', np === files.length ? np + ' processes'
                      : files.length + ' snapshots of ' + np + (np === 1 ? ' process' : ' processes'));
    var t = h('table', {}, sec), hr = h('tr', {}, h('thead', {}, t)), tb = h('tbody', {}, t);
    ['file', 'rank', 'pid', 'reason', 'peak', 'OOM'].forEach(function (c, i) { h('th', { 'class': i ? '' : 'l' }, hr, c); });
    var W = widthOf(sec), H = 160, ml = 64, mb = 22;
    var end = 1, ymax = 1;
    files.forEach(function (f) { f.devices.forEach(function (d) { end = Math.max(end, d.end_ns); ymax = Math.max(ymax, d.peak); }); });
    files.forEach(function (f, i) {
      var peak = 0;
      f.devices.forEach(function (d) { peak = Math.max(peak, d.peak); });
      var r = h('tr', { 'data-file': i }, tb);
      var td = h('td', { 'class': 'l' }, r);
      h('span', { 'class': 'sw', style: 'display:inline-block;width:9px;height:9px;margin-right:5px;background:' + color(i) }, td);
      var a = h('a', { href: '#' }, td, f.file);
      a.addEventListener('click', function (ev) { ev.preventDefault(); onPick(i); });
      h('td', {}, r, f.rank == null ? '-' : String(f.rank));
      h('td', {}, r, String(f.pid));
      h('td', {}, r, f.reason);
      h('td', {}, r, bytes(peak));
      h('td', {}, r, f.oom ? f.oom.cause : '-');
      if (i === pick) r.classList.add('sel');
    });
    var svgEl = s('svg', { width: W, height: H, id: 'ranks-chart' }, sec);
    var px = function (t) { return ml + t / end * (W - ml - 10); };
    var py = function (v) { return 8 + (1 - v / ymax) * (H - 8 - mb); };
    s('text', { x: ml - 6, y: py(ymax) + 8, 'text-anchor': 'end' }, svgEl, bytes(ymax));
    s('text', { x: ml - 6, y: py(0), 'text-anchor': 'end' }, svgEl, '0');
    s('text', { x: W - 10, y: H - 6, 'text-anchor': 'end' }, svgEl, dur(end));
    files.forEach(function (f, i) {
      f.devices.filter(function (d) { return d.ordinal >= 0; }).forEach(function (d) {
        var p = 'M' + px(0) + ',' + py(0);
        d.points.forEach(function (q, k) {
          var nx = k + 1 < d.points.length ? d.points[k + 1][0] : d.end_ns;
          p += 'L' + px(q[0]).toFixed(1) + ',' + py(q[1]).toFixed(1) + 'L' + px(nx).toFixed(1) + ',' + py(q[1]).toFixed(1);
        });
        s('path', { d: p, fill: 'none', stroke: color(i), 'stroke-width': 1.5, 'class': 'rank-line', 'data-file': i }, svgEl);
      });
    });
    h('p', { 'class': 'note' }, sec, 'Each line: one process\'s device memory over time since its own start. The sections below show the process picked above.');
  }

  /* ---------------- diff ---------------- */

  function drawDiffSummary(a, b) {
    var sec = section('diffsummary', 'Peak per device: base vs new');
    var t = h('table', {}, sec), hr = h('tr', {}, h('thead', {}, t)), tb = h('tbody', {}, t);
    h('p', { 'class': 'note' }, sec, 'base: ' + a.file + ' (' + procName(a) + '); new: ' + b.file + ' (' + procName(b) + ')');
    ['device', 'base peak', 'new peak', 'change'].forEach(function (c, i) { h('th', { 'class': i ? '' : 'l' }, hr, c); });
    var names = {};
    a.devices.concat(b.devices).forEach(function (d) { names[d.name] = 1; });
    Object.keys(names).forEach(function (n) {
      var da = a.devices.filter(function (d) { return d.name === n; })[0], db = b.devices.filter(function (d) { return d.name === n; })[0];
      var pa = da ? da.peak : 0, pb = db ? db.peak : 0, r = h('tr', {}, tb);
      h('td', { 'class': 'l' }, r, n);
      h('td', {}, r, bytes(pa));
      h('td', {}, r, bytes(pb));
      h('td', {}, r, sbytes(pb - pa) + (pa ? ' (' + (100 * (pb - pa) / pa).toFixed(1) + '%)' : ''));
      /* what PyTorch's tensors peaked at, beside what it reserved */
      var ta = da && da.tensors ? da.tensors.peak_allocated : null, tb2 = db && db.tensors ? db.tensors.peak_allocated : null;
      if (ta != null || tb2 != null) {
        var rt = h('tr', { 'class': 'tensor-peak' }, tb);
        h('td', { 'class': 'l' }, rt, n + ': PyTorch\'s tensors (max_memory_allocated)');
        h('td', {}, rt, bytes(ta));
        h('td', {}, rt, bytes(tb2));
        h('td', {}, rt, ta != null && tb2 != null ? sbytes(tb2 - ta) : '');
      }
    });
  }

  function drawDiffTimelines(a, b) {
    var sec = section('timeline', 'Memory over time: base above, new below, same time and size axes');
    /* one time axis for all; one size axis per device name */
    var end = 1, ymax = {};
    [a, b].forEach(function (f) { f.devices.forEach(function (d) { end = Math.max(end, d.end_ns); ymax[d.name] = Math.max(ymax[d.name] || 1, d.peak); }); });
    [[a, 'base'], [b, 'new']].forEach(function (p) {
      p[0].devices.forEach(function (dev) {
        h('h3', {}, sec, p[1] + ' (' + procName(p[0]) + '), ' + dev.name + ': peak ' + bytes(dev.peak));
        timelineChart(sec, p[0], dev, { domain: [0, end], ymax: ymax[dev.name], height: 180 });
      });
    });
  }

  /* ---------------- page ---------------- */

  var api = { data: D, bytes: bytes };
  window.cumemtrace = api;

  function meta(f) {
    var m = document.getElementById('meta');
    m.textContent = '';
    h('div', {}, m, f.file + ' - ' + procName(f) + (f.host ? ' on ' + f.host : '') + ', ' + f.reason + ' dump at ' + dur(f.dump_ns));
    if (f.recovered)
      h('div', { 'class': 'note', id: 'recovered' }, m, 'Recovered from the stream of a process that was killed: ' + f.recovered);
    if (f.cmdline.length) h('code', {}, h('div', {}, m), f.cmdline.join(' '));
    h('div', {}, m, 'written by ' + (f.tool_version ? 'cumemtrace ' + f.tool_version : 'cumemtrace') + ', drawn by ' + D.generator);
  }

  function renderFile(i) {
    main.textContent = '';
    var f = D.files[i];
    if (D.files.length > 1) {
      drawRanks(D.files, i, function (k) { picker.value = k; renderFile(k); });
    }
    meta(f);
    drawPostmortem(f);
    drawTensors(f);
    drawRoles(f);
    performance.mark('cmt-timeline');
    drawTimeline(f);
    performance.mark('cmt-flame');
    drawFlame(f);
    performance.mark('cmt-sites');
    drawSites(f);
  }

  var picker = null;
  if (D.kind === 'diff') {
    meta(D.files[1]);
    drawDiffSummary(D.files[0], D.files[1]);
    drawFlame(D.files[1], D.files[0]);
    drawDiffTimelines(D.files[0], D.files[1]);
  } else {
    var pick = 0;
    D.files.forEach(function (f, i) {
      if (f.oom && !D.files[pick].oom) pick = i;
      var pf = 0, pp = 0;
      f.devices.forEach(function (d) { pf = Math.max(pf, d.peak); });
      D.files[pick].devices.forEach(function (d) { pp = Math.max(pp, d.peak); });
      if (!!f.oom === !!D.files[pick].oom && pf > pp) pick = i;
    });
    if (D.files.length > 1) {
      var pk = document.getElementById('picker');
      pk.appendChild(document.createTextNode('process: '));
      picker = h('select', { id: 'file-picker' }, pk);
      D.files.forEach(function (f, i) { h('option', { value: i }, picker, procName(f) + ' - ' + f.file); });
      picker.value = pick;
      picker.addEventListener('change', function () { renderFile(+picker.value); });
    }
    renderFile(pick);
  }
  performance.mark('cmt-drawn');
  /* Interactive once the first frame with everything drawn has been laid
   * out and painted: a task queued from the frame's callback runs after it. */
  requestAnimationFrame(function () {
    setTimeout(function () { performance.mark('cmt-interactive'); }, 0);
  });
})();
