#!/usr/bin/env bash
# Flash, static RAM and the libraries' share of the firmware's code, from its ELF file alone.
#
#   bash scripts/firmware-size.sh <firmware ELF> [more ELF files]
#
# Needs only binutils (`readelf`, `objdump`, `addr2line`), which read ARM ELF files on any host.
#
# - flash: .vector_table + .text + .rodata + .data (.data's initial values are in flash);
# - static RAM: .data + .bss + .uninit (the stack is the rest of RAM);
# - share: every .text byte is attributed to the source file its DWARF line table names (the
#   release profile keeps line tables), so code of deadline-core or deadline-embassy inlined
#   into the firmware's task counts as theirs, and code of Rust's `core` inlined into theirs
#   counts as `core`'s. Bytes with no line row (hand-written assembly, compiler-builtins'
#   intrinsics) are "no line info".
#
# With FUNCTIONS_OUT=<file>, also writes there every function of deadline-core and
# deadline-embassy found in the inline chains of the code (the function, without its generic
# arguments, and its source file, one per line, with the bytes of code it is part of), which
# scripts/firmware.sh checks for code that must not be linked.
set -euo pipefail

for cmd in readelf objdump addr2line; do
  command -v "$cmd" >/dev/null || { echo "firmware-size: $cmd (binutils) is missing" >&2; exit 1; }
done

HEX='function hex(h,  i, v) { v = 0; h = tolower(h); sub(/^0x/, "", h); for (i = 1; i <= length(h); i++) v = v * 16 + index("0123456789abcdef", substr(h, i, 1)) - 1; return v }'
ROWS=$(mktemp)
CHAINS=$(mktemp)
trap 'rm -f "$ROWS" "$CHAINS"' EXIT

for elf in "$@"; do
  # `readelf -S --wide` rows: [Nr] Name Type Addr Off Size ...; the bracket may hold a space.
  read -r vt text rodata data bss uninit text_lo < <(readelf -S --wide "$elf" | awk "$HEX"'
    { sub(/^ *\[ *[0-9]+\] */, "") }
    { size[$1] = hex($5); addr[$1] = hex($3) }
    END { printf "%d %d %d %d %d %d %d\n", size[".vector_table"], size[".text"], size[".rodata"], size[".data"], size[".bss"], size[".uninit"], addr[".text"] }')
  flash=$((vt + text + rodata + data))
  ram=$((data + bss + uninit))
  echo "== $elf"
  printf '  flash %6d B (%.1f KiB) = .vector_table %d + .text %d + .rodata %d + .data %d\n' \
    "$flash" "$(awk -v b="$flash" 'BEGIN { print b / 1024 }')" "$vt" "$text" "$rodata" "$data"
  printf '  static RAM %6d B (%.1f KiB) = .data %d + .bss %d + .uninit %d\n' \
    "$ram" "$(awk -v b="$ram" 'BEGIN { print b / 1024 }')" "$data" "$bss" "$uninit"

  # .text bytes by source file: each line-table row covers the bytes up to the next row of
  # its sequence; sequences outside .text (functions the linker dropped) are ignored.
  objdump --dwarf=decodedline "$elf" | awk -v lo="$text_lo" -v hi="$((text_lo + text))" "$HEX"'
    /^(Contents of|File name|CU:)/ || NF == 0 { next }
    NF >= 3 && $3 ~ /^0x/ {
      a = hex($3)
      if (!open) start = a
      if (open && a > prev && start >= lo && prev < hi) print prev, a - prev
      if ($2 == "-") open = 0; else { open = 1; prev = a }
    }' >"$ROWS"
  # The inline chain of each row's first byte, innermost frame first.
  # Each address, then a function name and a file:line per frame.
  awk '{ printf "0x%x\n", $1 }' "$ROWS" | addr2line -i -a -f -e "$elf" >"$CHAINS"
  awk -v total="$text" -v functions="${FUNCTIONS_OUT:-}" "$HEX"'
    function group(p) {
      if (p ~ /\/deadline-core\//) return "deadline-core"
      if (p ~ /\/deadline-embassy\//) return "deadline-embassy"
      if (p ~ /\/firmware\//) return "firmware"
      if (p ~ /\/embassy-/) return "embassy crates"
      if (p ~ /\/cortex-m/) return "cortex-m crates"
      if (p ~ /compiler.builtins/) return "compiler-builtins"
      if (p ~ /^\/rustc\//) return "Rust core library"
      return "other crates"
    }
    function std(p) { return p ~ /^\/rustc\// || p ~ /compiler.builtins/ }
    function flush() {
      if (at == "") return
      if (!(at in size)) { at = ""; return }
      if (owner == "") owner = first
      # A row whose code is its own source file (not Rust core inlined into it) attributes
      # the same both ways.
      by_line[group(first)] += size[at]
      by_chain[group(owner)] += size[at]
      if (group(owner) ~ /^deadline-/) { o = owner; sub(/:[0-9?]+.*$/, "", o); sub(/.*\/deadline-/, "deadline-", o); by_file[o] += size[at] }
      # Every deadline function in the chain, once per row.
      for (k in seen) { by_function[k] += size[at]; delete seen[k] }
      at = ""
    }
    NR == FNR { size[$1] = $2; next }
    /^0x/ { flush(); at = hex($1); owner = ""; first = ""; odd = 1; next }
    odd { name = $0; sub(/<.*$/, "", name); odd = 0; next }
    {
      odd = 1
      if (first == "") first = $1; if (owner == "" && !std($1)) owner = $1
      if ($1 ~ /\/deadline-(core|embassy)\//) { f = $1; sub(/:[0-9?]+.*$/, "", f); sub(/.*\/deadline-/, "deadline-", f); seen[f " " name] = 1 }
    }
    END {
      flush()
      printf "  .text by source file (DWARF line tables; code inlined into the task counted where it was written):\n"
      printf "    %-20s %20s %22s\n", "", "as written", "with Rust core inlined"
      n = split("deadline-core|deadline-embassy|firmware|embassy crates|cortex-m crates|Rust core library|compiler-builtins|other crates", order, "|")
      for (i = 1; i <= n; i++) {
        g = order[i]; s1 += by_line[g]
        printf "    %-20s %8d B (%4.1f%%) %12d B (%4.1f%%)\n", g, by_line[g], 100 * by_line[g] / total, by_chain[g], 100 * by_chain[g] / total
      }
      printf "    %-20s %8d B\n", "no line info", total - s1
      printf "  deadline-core and deadline-embassy by file (with Rust core inlined into them):\n"
      for (k in by_file) printf "    %6d B  %s\n", by_file[k], k | "sort -rn"
      close("sort -rn")
      if (functions != "") {
        for (k in by_function) printf "%s %d\n", k, by_function[k] > functions
        close(functions)
      }
    }' "$ROWS" "$CHAINS"
done
