  /* tensors.js - PyTorch's own view in the page (see common.js for how the
   * script's files are joined): its live tensors by the Python line that
   * allocated them (its allocation history, the model's tensors.top), and
   * its tensors' peak (max_memory_allocated) beside each device's peak,
   * which counts what it reserved.  The call-site table stays: for PyTorch
   * its rows are the cached segments, by the line that created each. */
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

  function drawTensors(file) {
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
                   parts.length ? parts[0] : 'no Python stack (autograd\'s backward thread)');
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

