  /* flame.js - the flame graph / icicle of live bytes by stack, and its
   * diff (see common.js for how the script's files are joined). */
  /* ---------------- flame graph ---------------- */

  /* The icicle is built as it is drawn: a node keeps the groups (stack,
   * bytes) that pass through it and shares them out among its children
   * only when it is laid out wide enough to show them.  A 100 000-stack
   * snapshot has millions of nodes, nearly all narrower than a pixel and
   * never built; the model counts them (html_flame.c).  A step's key is its
   * frame index (equal names share an index, so stacks merge as `cumemtrace
   * flamegraph` merges its lines), -1 for "[no stack]", -2 - id for an
   * entry point.  Steps of a stack run outermost first: its frames, then
   * its entry point (none for PyTorch's tensors: entry key 0). */
  function stepCount(S, st) { return st < 0 ? 1 : S.off[st + 1] - S.off[st] + (S.ent[st] ? 1 : 0); }
  function stepKey(S, st, j) {
    if (st < 0) return -1;
    var end = S.off[st + 1];
    return j < end - S.off[st] ? frameAt(S, end - 1 - j) : S.ent[st];
  }
  function node(key, parent, name, type) {
    if (name == null) {
      name = key >= 0 ? FR[key][0] : key === -1 ? '[no stack]' : ENTRY_NAME[-2 - key];
      type = key >= 0 ? FR[key][1] : key === -1 ? 2 : 3;
    }
    return { name: name, type: type, value: 0, base: 0, parent: parent, j: 0, items: null,
             bitems: null, devs: null, list: null };
  }
  function items(S) { return { S: S, st: [], b: [] }; }
  /* Adds file's groups of one device and mode to n (its base side for a
   * diff); the depth they reach below n goes into root.depth. */
  function addGroups(root, n, file, g, isBase, below) {
    var S = stacksOf(file), it = isBase ? (n.bitems || (n.bitems = items(S))) : (n.items || (n.items = items(S)));
    for (var i = 0; i < g.length; i++) {
      var st = g[i][0], v = g[i][1];
      if (!v) continue;
      if (st == null || st < 0 || st >= S.n) st = -1;
      it.st.push(st);
      it.b.push(v);
      if (isBase) { root.base += v; if (n !== root) n.base += v; continue; }
      root.value += v;
      if (n !== root) n.value += v;
      var d = stepCount(S, st) + below;
      if (d > root.depth) root.depth = d;
    }
  }
  function buildTree(file, mode, into, isBase) {
    var root = into;
    if (!root) { root = node(null, null, 'all', 4); root.depth = 0; root.count = file.flame_nodes[mode] || 1; }
    /* device memory only, as `cumemtrace flamegraph`: pinned host memory
     * is not what runs out on the GPU */
    var devs = file.devices.filter(function (d) { return d.ordinal >= 0 && d.groups[mode]; });
    devs.forEach(function (d) {
      var top = root;
      if (devs.length > 1) {
        if (!root.devs) root.devs = new Map();
        top = root.devs.get(d.name);
        if (!top) {
          if (isBase) return; /* gone from the new file: no width, not drawn */
          root.devs.set(d.name, top = node(null, root, d.name, 4));
        }
      }
      addGroups(root, top, file, d.groups[mode], isBase, top !== root ? 1 : 0);
    });
    return root;
  }
  function share(n, it, isBase, map, list) {
    for (var i = 0; i < it.st.length; i++) {
      var st = it.st[i];
      if (n.j >= stepCount(it.S, st)) continue;
      var k = stepKey(it.S, st, n.j), c = map.get(k);
      if (!c) {
        if (isBase) continue; /* gone from the new file: no width, not drawn */
        map.set(k, c = node(k, n));
        c.j = n.j + 1;
        list.push(c);
      }
      var dst = isBase ? (c.bitems || (c.bitems = items(it.S))) : (c.items || (c.items = items(it.S)));
      dst.st.push(st);
      dst.b.push(it.b[i]);
      if (isBase) c.base += it.b[i]; else c.value += it.b[i];
    }
  }
  function kidsOf(n) {
    if (!n.list) {
      var list = [], map = new Map();
      if (n.devs) n.devs.forEach(function (c) { list.push(c); });
      else {
        if (n.items) share(n, n.items, false, map, list);
        if (n.bitems) share(n, n.bitems, true, map, list);
      }
      n.items = n.bitems = null;
      n.list = list.filter(function (c) { return c.value > 0; });
      n.list.sort(function (a, b) { return b.value - a.value || (a.name < b.name ? -1 : 1); });
    }
    return n.list;
  }
  var TYPE_FILL = {
    0: function (h2) { return 'hsl(' + (20 + h2 * 25) + ',80%,' + (60 + h2 * 8) + '%)'; },
    1: function (h2) { return 'hsl(' + (165 + h2 * 25) + ',55%,' + (48 + h2 * 10) + '%)'; },
    2: function () { return '#c5cbd3'; },
    3: function () { return '#e5534b'; },
    4: function () { return '#9aa4b2'; }
  };
  function hash(str) { var x = 0; for (var i = 0; i < str.length; i++) x = (x * 31 + str.charCodeAt(i)) | 0; return ((x >>> 0) % 1000) / 1000; }

  /* An icicle (root on top), or with opts.flip a flame graph (root at the
   * bottom): width = bytes.  Click zooms, the search box highlights
   * matches.  With diff, colour says grown (red) or shrunk (blue) from the
   * base. */
  function flameChart(parent, root, opts) {
    opts = opts || {};
    var W = widthOf(parent), RH = 18, minW = 0.5;
    var depth = root.depth;
    var box = h('div', { 'class': 'fg-box' }, parent);
    var svgEl = s('svg', { width: W, height: (depth + 1) * RH + 4, 'class': 'fg', 'data-nodes': root.count }, box);
    var focus = root, query = '', flip = !!opts.flip;
    function rowY(d) { return (flip ? depth - d : d) * RH; }
    /* diff colours scale to the largest change among the frames drawn */
    var maxDelta = 1;
    function fill(n) {
      if (opts.diff) {
        var dlt = n.value - n.base, a = Math.min(1, Math.abs(dlt) / maxDelta);
        if (dlt === 0) return '#e6e8eb';
        return dlt > 0 ? 'rgb(255,' + Math.round(230 - 190 * a) + ',' + Math.round(230 - 190 * a) + ')'
                       : 'rgb(' + Math.round(230 - 190 * a) + ',' + Math.round(230 - 150 * a) + ',255)';
      }
      return TYPE_FILL[n.type](hash(n.name));
    }
    /* One listener per event for the whole graph, not three per rectangle. */
    var nodes = [];
    function hit(ev) {
      var g = ev.target.closest ? ev.target.closest('g[data-i]') : null;
      return g ? nodes[+g.getAttribute('data-i')] : null;
    }
    svgEl.addEventListener('click', function (ev) { var n = hit(ev); if (n) { focus = n; draw(); } });
    svgEl.addEventListener('mousemove', function (ev) {
      var n = hit(ev);
      if (!n) { hideTip(); return; }
      var t = n.name + '\n' + bytes(n.value) + ' (' + (100 * n.value / (root.value || 1)).toFixed(1) + '% of ' + bytes(root.value) + ')';
      if (opts.diff) t += '\nbase ' + bytes(n.base) + ', change ' + sbytes(n.value - n.base);
      showTip(ev, t);
    });
    svgEl.addEventListener('mouseleave', hideTip);
    function draw() {
      while (svgEl.firstChild) svgEl.removeChild(svgEl.firstChild);
      nodes = [];
      var drawn = 0, matched = 0;
      var re = query.toLowerCase();
      /* ancestors of the focus span the full width */
      var chain = [], a = focus;
      while (a) { chain.unshift(a); a = a.parent; }
      function rect(n, x, w, d) {
        if (w < minW) return;
        var g = s('g', { 'data-i': nodes.length }, svgEl);
        nodes.push(n);
        var r = s('rect', { x: x.toFixed(2), y: rowY(d), width: Math.max(0.1, w - 0.5).toFixed(2), height: RH - 1,
                            fill: fill(n), 'data-name': n.name, 'data-type': n.type, 'data-bytes': n.value }, g);
        if (re && n.name.toLowerCase().indexOf(re) >= 0) { r.classList.add('match'); matched++; }
        if (w > 40) boxLabel(g, { x: x + 3, y: rowY(d) + 13 }, n.name, w - 6, FONT_LABEL);
        drawn++;
      }
      /* laid out first, drawn second: a diff's colours need the largest
       * change among the frames drawn */
      var todo = [];
      for (var i = 0; i < chain.length - 1; i++) todo.push([chain[i], 0, W, i]);
      /* depth first, parents before children, without recursion: a stack
       * 10 000 frames deep would exceed the script's call stack */
      var open = [[focus, 0, W, chain.length - 1]];
      while (open.length) {
        var e = open.pop(), n = e[0], x = e[1], w = e[2], d = e[3];
        if (w < minW) continue;
        todo.push(e);
        var kids = kidsOf(n), cx = x, at = [];
        for (var k = 0; k < kids.length; k++) {
          var cw = w * kids[k].value / (n.value || 1);
          at.push([kids[k], cx, cw, d + 1]);
          cx += cw;
        }
        while (at.length) open.push(at.pop());
      }
      maxDelta = 1;
      if (opts.diff) todo.forEach(function (e) { maxDelta = Math.max(maxDelta, Math.abs(e[0].value - e[0].base)); });
      todo.forEach(function (e) { rect(e[0], e[1], e[2], e[3]); });
      svgEl.setAttribute('data-drawn', drawn);
      svgEl.setAttribute('data-hidden', root.count - drawn); /* narrower than minW, or below one */
      svgEl.setAttribute('data-matched', matched);
    }
    draw();
    return {
      svg: svgEl,
      search: function (q) { query = q; draw(); },
      flip: function (f) { flip = f; draw(); },
      reset: function () { focus = root; draw(); }
    };
  }

  function drawFlame(file, diffBase) {
    var sec = section('flamegraph', diffBase ? 'Differential flame graph' : 'Flame graph');
    var modes = [['peak', 'at the peak'], ['live', 'live at the dump']];
    if (file.oom) modes.push(['oom', 'at the OOM']);
    var ctl = h('div', { 'class': 'controls' }, sec);
    var holder = h('div', {}, sec);
    var search = h('input', { type: 'search', placeholder: 'highlight frames matching\u2026', id: 'fg-search', size: 30 });
    var info = h('span', { 'class': 'note' });
    var chart = null, mode = 'peak', flip = false;
    function render() {
      holder.textContent = '';
      var root = buildTree(file, mode);
      if (diffBase) buildTree(diffBase, mode, root, true);
      if (!root.value) { h('p', { 'class': 'note' }, holder, 'Nothing held ' + modes.filter(function (m) { return m[0] === mode; })[0][1] + '.'); chart = null; return; }
      var tens = file.devices.some(function (d) { return d.groups_tensors && d.groups_tensors[mode]; });
      h('p', { 'class': 'note' }, holder, bytes(root.value) + ' held ' +
        modes.filter(function (m) { return m[0] === mode; })[0][1] +
        (tens ? ": PyTorch's live tensors by their Python stack (as cumemtrace flamegraph draws them; --segments draws the driver's segments)"
              : file.tensor_model ? ": the driver's segments (the file has no reading of PyTorch's tensors at this moment)" : '') + '. ' +
        (diffBase ? 'Width: bytes in the new file; red grew, blue shrank since the base (' + (tens ? 'lines' : 'call sites') + ' gone from the new file have no width).'
                  : 'Python frames green-blue, native frames orange, CUDA entry points red. Click a frame to zoom, click a frame nearer the root to zoom out.'));
      chart = flameChart(holder, root, { diff: !!diffBase, flip: flip });
      if (search.value) chart.search(search.value);
      api.flame = chart;
    }
    modes.forEach(function (m) {
      var b = h('button', { type: 'button', 'data-mode': m[0] }, ctl, m[1]);
      b.addEventListener('click', function () {
        mode = m[0];
        ctl.querySelectorAll('button').forEach(function (x) { x.classList.toggle('on', x === b); });
        render();
      });
      if (m[0] === mode) b.classList.add('on');
    });
    var fl = h('label', { 'class': 'note' }, ctl);
    var flipBox = h('input', { type: 'checkbox', id: 'fg-flip' }, fl);
    fl.appendChild(document.createTextNode(' flame (root at the bottom) '));
    flipBox.addEventListener('change', function () { flip = flipBox.checked; if (chart) chart.flip(flip); });
    ctl.appendChild(search);
    ctl.appendChild(info);
    search.addEventListener('input', function () {
      if (!chart) return;
      chart.search(search.value);
      info.textContent = search.value ? chart.svg.getAttribute('data-matched') + ' frames match' : '';
    });
    render();
  }

