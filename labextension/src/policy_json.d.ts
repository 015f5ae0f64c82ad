/**
 * The shape of the drawing policy (src/ipyagent/notebook/render/policy.json), imported as a
 * module: rspack and esbuild bundle the JSON; tsc, whose rootDir is src/, takes this type for it
 * and leaves the import as it is (lib/ sits beside src/, so the same relative path resolves).
 */
declare module '*/render/policy.json' {
  const policy: {
    sanitizer: {
      tags: string[];
      attributes: { [tag: string]: string[] };
      style_properties: string[];
      url_schemes: string[];
    };
    images: {
      raster_types: string[];
      audio_types: string[];
      link_class: string;
      link_label: string;
      default_alt: string;
    };
    links: { rel: string; referrerpolicy: string };
    evaluation: { page_rows: number; first_line_chars: number; preview_chars: number;
      summary_columns: [string, string][];
      summary_details_columns: [string, string][] };
  };
  export default policy;
}
