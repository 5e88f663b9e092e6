// Grafana panel constructors (dashboard JSON model, schema 39), small on
// purpose: every panel is a type, a title, its queries and a unit.
{
  datasource:: { type: 'prometheus', uid: '${datasource}' },

  target(expr, legend='', instant=false, format='time_series'):: {
    datasource: $.datasource,
    expr: expr,
    legendFormat: legend,
    instant: instant,
    range: !instant,
    format: format,
    refId: 'A',
  },

  // Targets get refIds A, B, C... in order.
  withRefs(targets):: [targets[i] { refId: std.char(65 + i) } for i in std.range(0, std.length(targets) - 1)],

  timeseries(title, description, targets, unit, stack=false, percent=false):: {
    type: 'timeseries',
    title: title,
    description: description,
    datasource: $.datasource,
    targets: $.withRefs(targets),
    fieldConfig: {
      defaults: {
        unit: unit,
        custom: {
          stacking: { mode: if percent then 'percent' else if stack then 'normal' else 'none' },
          fillOpacity: if stack || percent then 60 else 10,
          lineWidth: 1,
        },
      },
      overrides: [],
    },
    options: { legend: { displayMode: 'table', placement: 'right', calcs: ['mean', 'max'] }, tooltip: { mode: 'multi', sort: 'desc' } },
  },

  heatmap(title, description, target):: {
    type: 'heatmap',
    title: title,
    description: description,
    datasource: $.datasource,
    targets: $.withRefs([target]),
    options: {
      calculate: false,
      yAxis: { unit: 's' },
      cellGap: 0,
      color: { mode: 'scheme', scheme: 'Oranges', scale: 'exponential', exponent: 0.5 },
      rowsFrame: { layout: 'auto' },
    },
  },

  table(title, description, targets, unit):: {
    type: 'table',
    title: title,
    description: description,
    datasource: $.datasource,
    targets: $.withRefs(targets),
    fieldConfig: { defaults: { unit: unit }, overrides: [] },
    transformations: [
      { id: 'merge', options: {} },
      { id: 'organize', options: { excludeByName: { Time: true, job: true } } },
    ],
    options: { sortBy: [{ displayName: 'Value', desc: true }] },
  },

  row(title):: { type: 'row', title: title, collapsed: false, panels: [] },

  // Lays panels out left to right, `width` grid units each, 8 high; a row
  // takes a line of its own.
  layout(panels, width=12)::
    local place(acc, p) =
      if p.type == 'row' then
        local y = if acc.x == 0 then acc.y else acc.y + 8;
        { x: 0, y: y + 1, out: acc.out + [p { gridPos: { x: 0, y: y, w: 24, h: 1 } }] }
      else
        local w = if std.objectHas(p, 'width') then p.width else width;
        local wrap = acc.x + w > 24;
        local x = if wrap then 0 else acc.x;
        local y = if wrap then acc.y + 8 else acc.y;
        { x: x + w, y: y, out: acc.out + [p { width:: w, gridPos: { x: x, y: y, w: w, h: 8 } }] };
    local laid = std.foldl(place, panels, { x: 0, y: 0, out: [] }).out;
    [laid[i] { id: i + 1 } for i in std.range(0, std.length(laid) - 1)],
}
