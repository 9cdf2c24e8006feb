"""The style sheet of the HTML report page (``_html``): inline in the page, which
loads nothing from elsewhere."""

from __future__ import annotations

__all__ = ["STYLE"]

STYLE = """
:root { --ink:#1f2933; --muted:#52606d; --line:#d9e2ec; --bg:#f5f7fa; --card:#fff;
  --pinned:#7048e8; --selected:#1c7ed6; --reserved:#f59f00; --unused:#dee2e6;
  --excluded:#adb5bd; --bad:#c92a2a; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
  color:var(--ink); background:var(--bg); }
main { max-width:1180px; margin:0 auto; padding:24px 24px 48px; }
header h1 { margin:0 0 4px; font-size:26px; }
header p { margin:0; color:var(--muted); }
section { background:var(--card); border:1px solid var(--line); border-radius:10px;
  padding:16px 20px; margin:18px 0; }
h2 { font-size:18px; margin:0 0 10px; }
.alert { border:2px solid var(--bad); background:#fff5f5; }
.alert h2 { color:var(--bad); }
.warnbox { border-left:6px solid var(--reserved); }
.stats { display:flex; flex-wrap:wrap; gap:12px; background:none; border:none; padding:0; }
.stat { background:var(--card); border:1px solid var(--line); border-radius:10px;
  padding:10px 16px; min-width:140px; }
.stat-value { display:block; font-size:24px; font-weight:650; }
.stat-label { color:var(--muted); font-size:13px; }
.bar-wrap { position:relative; padding-top:22px; }
.bar { display:flex; height:30px; border-radius:6px; overflow:hidden; background:var(--unused);
  border:1px solid var(--line); }
.seg { height:100%; }
.seg-pinned { background:var(--pinned); } .seg-selected { background:var(--selected); }
.seg-reserved { background:var(--reserved); } .seg-unused { background:var(--unused); }
.seg-excluded { background:var(--excluded); }
.marker { position:absolute; top:0; bottom:-4px; border-left:2px dashed var(--ink); }
.marker span { position:absolute; top:0; left:4px; font-size:12px; white-space:nowrap;
  color:var(--muted); }
.legend { list-style:none; display:flex; flex-wrap:wrap; gap:18px; padding:0; margin:10px 0 0; }
.swatch { display:inline-block; width:12px; height:12px; border-radius:3px; margin-right:6px;
  vertical-align:-1px; }
.note { color:var(--muted); margin:4px 0 10px; } .warn { color:var(--bad); font-weight:600; }
.trimmed { display:block; color:var(--muted); font-size:0.85em; }
table { width:100%; border-collapse:collapse; }
th, td { text-align:left; padding:6px 8px; border-bottom:1px solid var(--line);
  vertical-align:top; }
th { font-size:13px; color:var(--muted); font-weight:600; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
td.empty { color:var(--muted); }
table.items { table-layout:fixed; }
col.c-pos { width:3.2em; } col.c-score { width:4.6em; } col.c-reason { width:19%; }
col.c-kind { width:12%; } col.c-tokens { width:5.4em; }
td { overflow-wrap:anywhere; }
details summary { cursor:pointer; overflow-wrap:anywhere; }
pre { white-space:pre-wrap; overflow-wrap:anywhere; margin:6px 0; font:13px/1.45 ui-monospace,
  SFMono-Regular,Menlo,Consolas,monospace; background:var(--bg); padding:8px; border-radius:6px; }
dl.item-data { display:grid; grid-template-columns:max-content 1fr; gap:2px 12px; margin:6px 0;
  font-size:13px; }
dl.item-data dt { color:var(--muted); } dl.item-data dd { margin:0; overflow-wrap:anywhere; }
.badge { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12px;
  font-weight:600; color:#fff; background:#495057; max-width:100%; overflow-wrap:anywhere; }
.fields { margin-top:4px; font-size:12px; color:var(--muted); }
.field { display:block; overflow-wrap:anywhere; } .field-name { font-weight:600; }
.kind { font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; font-size:13px; }
.stages { display:grid; gap:6px; }
.stage { display:grid; grid-template-columns:110px 1fr 100px 90px; gap:10px; align-items:center; }
.stage-name { overflow-wrap:anywhere; }
.track { background:var(--bg); border-radius:4px; height:16px; display:block; }
.track .span { display:block; height:100%; background:var(--selected); border-radius:4px; }
.stage-ms, .stage-items { text-align:right; font-variant-numeric:tabular-nums; font-size:13px; }
.kind-bar { width:35%; } .kind-bar span { display:inline-block; height:12px; }
footer { color:var(--muted); font-size:12px; text-align:center; }
"""
