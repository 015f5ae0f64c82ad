/**
 * Numbers written as the Python side writes them, so both renderers show the same figures.
 *
 * JavaScript's `toFixed` rounds a value exactly halfway up (`(1.25).toFixed(1)` is "1.3"), Python's
 * format rounds it to the even digit (`f"{1.25:.1f}"` is "1.2"); every other value reads the same.
 */

/** `value` with `digits` decimals (0-20), as Python's `f"{value:.{digits}f}"` writes it. */
export function fixed(value: number, digits: number): string {
  const rounded = value.toFixed(digits);
  if (!isFinite(value) || Math.abs(value) >= 1e21) {
    return rounded;
  }
  // The exact decimal digits of the double (a value halfway has d + 1 of them, so 30 more are enough).
  const exact = Math.abs(value).toFixed(Math.min(100, digits + 30));
  const cut = exact.indexOf('.') + (digits ? digits + 1 : 0);
  if (!/^\.?50*$/.test(exact.slice(cut))) {
    return rounded;
  }
  const truncated = exact.slice(0, cut);
  const last = Number(truncated[truncated.length - 1]);
  return last % 2 === 0 ? (value < 0 ? '-' : '') + truncated : rounded;
}

/** A cost as render/evaluation.usd writes it: `$0.1235`; under a cent six decimals at most
 * (`$0.000125`); `—` when unknown. */
export function usd(value: number | null): string {
  if (value === null) {
    return '—';
  }
  if (value >= 0.01) {
    return `$${fixed(value, 4)}`;
  }
  return value ? `$${fixed(value, 6).replace(/0+$/, '').replace(/\.$/, '')}` : '$0';
}
