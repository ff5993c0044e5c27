  /* tensors.js - PyTorch's own view in the page (see common.js for how the
   * script's files are joined): its live tensors by the Python line that
   * allocated them (its allocation history, the model's tensors.top), and
   * its tensors' peak (max_memory_allocated) beside each device's peak,
   * which counts what it reserved.  A file with the tensor model (its
   * holders: every line, whole stacks, the cache, the growth) shows those;
   * without them (--segments) the largest 5 of its history.  The call-site table stays:
   * for PyTorch its rows are the cached segments, by the line that created
   * each. */
  /* ---------------- tensors ---------------- */

  /* The tensors to show: at the failure for a post-mortem, else each
   * device's at the dump; [[title, tensors]]. */
  function tensorSets(file) {
    var o = file.oom;
    if (o && o.allocator && o.allocator.tensors && o.allocator.tensors.top)
      return [['at the failure on device ' + o.device, o.allocator.tensors]];
    var out = [];
    file.devices.forEach(function (d) {
      if (d.tensors && d.tensors.top) out.push(['on ' + d.name + ' at the dump', d.tensors, d]);
    });
    return out;
  }
  function hasAllocator(file) {
    return (file.oom && file.oom.allocator) || file.devices.some(function (d) { return !!d.tensors; });
  }

  /* The tensor model's holders to show (html_tensors.c): at the failure,
   * and per device at the peak (max_memory_allocated) and at the dump;
   * [[title, holders, device, growth]]. */
  function holderSets(file) {
    var out = [], o = file.oom;
    if (o && o.allocator && o.allocator.holders && o.allocator.holders.oom)
      out.push(['At the failure on device ' + o.device, o.allocator.holders.oom]);
    file.devices.forEach(function (d) {
      var H = d.holders;
      if (!H) return;
      if (H.peak) out.push(['On ' + d.name + ' at the peak (max_memory_allocated' +
                            (H.peak.step != null ? ', step ' + H.peak.step : '') + ')', H.peak, d]);
      if (H.now) out.push(['On ' + d.name + ' at the dump', H.now, d, H.growth]);
    });
    return out;
  }

  function drawHolders(file, sets) {
    var sec = section('tensors', 'Who holds the memory: PyTorch\'s tensors, by line');
    h('p', { 'class': 'note' }, sec, 'PyTorch\'s live blocks grouped by the first frame in your own code ' +
      '(every line; the whole stack outward of it under each), and its cache as one row - the figures of ' +
      '`cumemtrace report`. The call-site table below names, for each cached segment, the line that created it.');
    sets.forEach(function (st) {
      var H = st[1], total = H.total;
      h('h3', {}, sec, st[0] + ': ' + bytes(H.total) + ' in ' + H.count + ' tensors' +
        (H.cache ? ', ' + bytes(H.cache[0]) + ' cached' : ''));
      if (st[2] && st[1] !== (st[2].holders || {}).peak) figuresAge(sec, st[2]);
      var t = h('table', { 'class': 'tensors holders' }, sec);
      var hr = h('tr', {}, h('thead', {}, t)), tb = h('tbody', {}, t);
      ['bytes', '% of tensors', 'tensors', 'line'].forEach(function (c, i) { h('th', { 'class': i === 3 ? 'l' : '' }, hr, c); });
      function row(line, b, n, callers, cls) {
        var tr = h('tr', { 'data-bytes': b, 'data-count': n, 'class': cls || '' }, tb);
        h('td', {}, tr, bytes(b));
        h('td', {}, tr, cls === 'cache' ? '' : total ? (100 * b / total).toFixed(1) + '%' : '-');
        h('td', {}, tr, cls === 'cache' ? '' : String(n));
        var td = h('td', { 'class': 'l', 'data-where': line }, tr, line);
        if (callers) h('div', { 'class': 'callers' }, td, '< ' + callers);
      }
      H.rows.forEach(function (r) { row(r[0], r[1], r[2], r[3]); });
      if (H.more) row(H.more[0] + ' more lines (folded by the writer)', H.more[1], H.more[2], '', 'more');
      if (H.cache) row('PyTorch\'s cache: ' + H.cache[1] + ' segments, largest free block ' + bytes(H.cache[2]),
                       H.cache[0], 0, '', 'cache');
      (st[3] || []).forEach(function (g) {
        h('p', { 'class': 'growth', 'data-bytes': g[2] }, sec, '+' + bytes(g[2]) + ' a step at ' + g[0] +
          (g[3] != null ? ', steps ' + g[3] + '-' + g[4] : '') + ', ' + bytes(g[1]) + ' now');
      });
    });
  }

  function drawTensors(file) {
    var hs = holderSets(file);
    if (hs.length) { drawHolders(file, hs); return; }
    var sets = tensorSets(file);
    if (!sets.length) return;
    var sec = section('tensors', 'Live tensors, by the Python line that allocated them');
    h('p', { 'class': 'note' }, sec, 'From PyTorch\'s own allocation history: the lines holding the most in live ' +
      'tensors (its largest 5). The call-site table below names, for each cached segment, the line that created it.');
    sets.forEach(function (st) {
      var T = st[1], total = T.allocated;
      h('h3', {}, sec, st[0] + ': ' + bytes(T.allocated) + ' in tensors, ' + bytes(T.reserved) + ' reserved');
      if (st[2]) figuresAge(sec, st[2]);
      if (!T.top.length) { h('p', {}, sec, 'No live tensors in PyTorch\'s history.'); return; }
      var t = h('table', { 'class': 'tensors' }, sec);
      var hr = h('tr', {}, h('thead', {}, t)), tb = h('tbody', {}, t);
      ['bytes', '% of tensors', 'tensors', 'Python line'].forEach(function (c, i) { h('th', { 'class': i === 3 ? 'l' : '' }, hr, c); });
      T.top.forEach(function (r) {
        var tr = h('tr', { 'data-bytes': r[1], 'data-count': r[2] }, tb), parts = r[0] ? r[0].split(' < ') : [];
        h('td', {}, tr, bytes(r[1]));
        h('td', {}, tr, total ? (100 * r[1] / total).toFixed(1) + '%' : '-');
        h('td', {}, tr, String(r[2]));
        var td = h('td', { 'class': 'l', 'data-where': r[0] }, tr,
                   parts.length ? parts[0] : 'no Python stack (allocated off the Python thread, e.g. by autograd\'s backward)');
        if (parts.length > 1) h('div', { 'class': 'callers' }, td, '< ' + parts.slice(1).join(' < '));
      });
    });
  }

  /* Under a device's heading: how old PyTorch's figures are, when they are
   * older than the snapshot or missing (the sentence `report` prints). */
  function figuresAge(parent, dev) {
    if (dev.figures_age) h('p', { 'class': 'note figures-age' }, parent, dev.figures_age);
  }

  /* Under a device's timeline heading: what its tensors peaked at. */
  function tensorPeak(parent, dev) {
    var T = dev.tensors;
    if (!T || T.peak_allocated == null) return;
    h('p', { 'class': 'note tensor-peak', 'data-bytes': T.peak_allocated }, parent,
      'PyTorch\'s tensors peaked at ' + bytes(T.peak_allocated) + ' (max_memory_allocated); the peak above is ' +
      'what it reserved from the driver.');
  }

