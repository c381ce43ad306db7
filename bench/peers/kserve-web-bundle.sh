#!/usr/bin/env bash
# Peer measurement: first-load transfer size of KServe's models web app
# (kserve/models-web-app) index page, to compare with Skiff's web/ budget
# (index page <= 300 KB transferred, compressed).
#
# MANUAL ONLY. CI does not run this script. It needs a front end
# built by hand beforehand (Angular 14, about 1 GB of node_modules, npm
# registry access) and it measures a third-party build, not Skiff.
#
# How the dist measured on 2026-11-22 was built (mirrors the upstream
# Dockerfile; Node 20.20.2, npm 11.19.1, 2 cores, ~3 min in all):
#
#   # models-web-app tag v1.0.1 (= c260554e803f405c6ead047e9a1a5eab3d8a0470)
#   git clone https://github.com/kserve/models-web-app && cd models-web-app
#   git archive v1.0.1 | tar -x -C /tmp/mwa
#   # shared "kubeflow" Angular library from kubeflow/notebooks at the commit
#   # pinned in frontend/COMMIT (0b835a7848ddcadf2c920a8e14aeae121ac982d9)
#   git clone https://github.com/kubeflow/notebooks && cd notebooks
#   git archive 0b835a7 components/crud-web-apps/common/frontend/kubeflow-common-lib | tar -x -C /tmp/kfnb
#   cd /tmp/kfnb/components/crud-web-apps/common/frontend/kubeflow-common-lib
#   npm ci && npm run build                      # -> dist/kubeflow
#   cd /tmp/mwa/frontend
#   CYPRESS_INSTALL_BINARY=0 NODE_OPTIONS=--openssl-legacy-provider \
#     npm ci --legacy-peer-deps                  # Dockerfile: npm install --legacy-peer-deps
#   cp -r /tmp/kfnb/.../kubeflow-common-lib/dist/kubeflow node_modules/kubeflow
#   # ONE DEVIATION: the build box has no internet, and Angular's font
#   # inlining (fetching fonts.googleapis.com at build time) fails, so
#   # projects.frontend.architect.build.configurations.production.optimization
#   # in angular.json was set to
#   #   {"scripts":true,"styles":{"minify":true,"inlineCritical":true},"fonts":false}
#   # (upstream builds inline the Google Fonts CSS, a few KB, into index.html;
#   # everything else is identical to "optimization": true).
#   NODE_OPTIONS=--openssl-legacy-provider npm run build -- --output-path=./dist/default
#   cp -r dist/default /tmp/mwa-dist
#
# Usage: bench/peers/kserve-web-bundle.sh [DIST_DIR]   (default /tmp/mwa-dist)
#
# What counts as "first page load" (route "/", the InferenceService list):
#   * index.html itself and favicon.ico;
#   * every <script src> and <link rel=stylesheet> in index.html that lives in
#     the dist (the app is built with --deploy-url static/, so "static/X" is
#     DIST/X). The app has no lazy routes: every page is in main.*.js;
#   * the "Material Icons" woff2 referenced by the stylesheet (mat-icon's
#     default font, used on the list page). The other icon font variants
#     (outlined/round/sharp/two-tone) and the .woff fallbacks are only fetched
#     if used, so they are listed as "on demand" and not counted;
#   * NOT counted, listed as external: URLs outside the dist (Google Fonts CSS
#     plus its Roboto woff2 files, and /dashboard_lib.bundle.js which the
#     Kubeflow central dashboard serves). Monaco (assets/monaco-editor, loaded
#     by the kubeflow lib only when an editor component is shown) and
#     ace-builds are not loaded on the index page.
# woff/woff2 are already compressed and servers do not re-compress them, so
# their gzip/brotli columns show the raw size.
# brotli uses the `brotli` CLI (-q 11) if present, else Node's zlib (q 11),
# else is shown as "-".
set -euo pipefail

DIST="${1:-/tmp/mwa-dist}"
if [ ! -f "$DIST/index.html" ]; then
  echo "no index.html in $DIST (build it first; see the comment at the top)" >&2
  exit 1
fi

gz_size() { gzip -9 -c -- "$1" | wc -c | tr -d ' '; }
br_size() {
  if command -v brotli >/dev/null 2>&1; then
    brotli -q 11 -c -- "$1" | wc -c | tr -d ' '
  elif command -v node >/dev/null 2>&1; then
    node -e 'const z=require("zlib"),fs=require("fs");
      const b=z.brotliCompressSync(fs.readFileSync(process.argv[1]),
        {params:{[z.constants.BROTLI_PARAM_QUALITY]:11}});
      console.log(b.length)' "$1"
  else
    echo "-"
  fi
}

# Lists "kind<TAB>ref" lines: eager (in dist), external, ondemand.
refs="$(python3 - "$DIST" <<'PY'
import os, re, sys
dist = sys.argv[1]
html = open(os.path.join(dist, "index.html"), encoding="utf-8").read()

def local(ref):
    """Map a URL from index.html to a path in dist, or None if external."""
    if re.match(r"^(https?:)?//", ref):
        return None
    p = ref.split("?")[0].split("#")[0].lstrip("/")
    if p.startswith("static/"):          # --deploy-url static/
        p = p[len("static/"):]
    return p if os.path.isfile(os.path.join(dist, p)) else None

out, seen = [], set()
def add(kind, ref):
    if (kind, ref) not in seen:
        seen.add((kind, ref)); out.append(f"{kind}\t{ref}")

add("eager", "index.html")
css_files = []
for m in re.finditer(r"<script\b[^>]*\bsrc=\"([^\"]+)\"", html):
    p = local(m.group(1))
    add("eager", p) if p else add("external", m.group(1))
for m in re.finditer(r"<link\b[^>]*>", html):
    tag = m.group(0)
    rel = re.search(r"\brel=\"([^\"]+)\"", tag)
    href = re.search(r"\bhref=\"([^\"]+)\"", tag)
    if not (rel and href):
        continue
    rel = rel.group(1)
    if "stylesheet" not in rel and "icon" not in rel:
        continue
    p = local(href.group(1))
    if p:
        add("eager", p)
        if p.endswith(".css"):
            css_files.append(p)
    else:
        add("external", href.group(1))

# Fonts from the app stylesheet(s): count the woff2 of the plain
# "Material Icons" family; everything else referenced there is on demand.
for css in css_files:
    text = open(os.path.join(dist, css), encoding="utf-8").read()
    for face in re.finditer(r"@font-face\s*{([^}]*)}", text):
        body = face.group(1)
        fam = re.search(r"font-family:\s*['\"]?([^;'\"]+)", body)
        fam = fam.group(1).strip() if fam else ""
        for u in re.finditer(r"url\(\s*['\"]?([^)'\"]+)['\"]?\s*\)", body):
            p = local(u.group(1))
            if not p:
                add("external", u.group(1)); continue
            kind = "eager" if fam == "Material Icons" and p.endswith(".woff2") else "ondemand"
            add(kind, p)
print("\n".join(out))
PY
)"

printf '%-48s %10s %10s %10s\n' "file (first load of /)" raw gzip-9 brotli
raw_t=0; gz_t=0; br_t=0; br_ok=1
while IFS=$'\t' read -r kind ref; do
  [ "$kind" = eager ] || continue
  f="$DIST/$ref"
  raw=$(wc -c <"$f" | tr -d ' ')
  case "$ref" in
    *.woff|*.woff2) gz=$raw; br=$raw ;;
    *) gz=$(gz_size "$f"); br=$(br_size "$f") ;;
  esac
  printf '%-48s %10s %10s %10s\n' "$ref" "$raw" "$gz" "$br"
  raw_t=$((raw_t + raw)); gz_t=$((gz_t + gz))
  if [ "$br" = "-" ]; then br_ok=0; else br_t=$((br_t + br)); fi
done <<<"$refs"
[ "$br_ok" = 1 ] || br_t="-"
printf '%-48s %10s %10s %10s\n' "TOTAL first load (bytes)" "$raw_t" "$gz_t" "$br_t"
printf '%-48s %10s %10s %10s\n' "TOTAL first load (KiB)" \
  "$((raw_t / 1024))" "$((gz_t / 1024))" "$([ "$br_t" = - ] && echo - || echo $((br_t / 1024)))"

echo
echo "not counted, external to the dist:"
while IFS=$'\t' read -r kind ref; do
  [ "$kind" = external ] && echo "  $ref"
done <<<"$refs"
echo "not counted, fonts fetched only if used:"
while IFS=$'\t' read -r kind ref; do
  [ "$kind" = ondemand ] && printf '  %-46s %10s\n' "$ref" "$(wc -c <"$DIST/$ref" | tr -d ' ')"
done <<<"$refs"

echo
maps=$(find "$DIST" -name '*.map' -type f -exec cat {} + | wc -c | tr -d ' ')
all=$(find "$DIST" -type f -exec cat {} + | wc -c | tr -d ' ')
echo "dist total: $all bytes ($(du -sh "$DIST" | cut -f1) on disk), of which"
echo "  source maps: $maps bytes"
for d in "$DIST"/assets/*/; do
  [ -d "$d" ] || continue
  echo "  assets/$(basename "$d"): $(find "$d" -type f -exec cat {} + | wc -c | tr -d ' ') bytes"
done
echo "  files: $(find "$DIST" -type f | wc -l)"
