/**
 * The build of the live view that this labextension carries (live_registry.ts): the first 16 hex
 * digits of the SHA-256 of `static/live.js`, the esbuild bundle of the same sources. tsc emits this
 * placeholder; `npm run build:live` replaces lib/live_build.js with the real id once the bundle is
 * made (scripts/build_live.mjs), before the labextension is bundled.
 */
export const LIVE_BUILD: string = 'unbuilt';
