package importer

import (
	"fmt"
	"strings"
)

// README renders a report as the package's README.md: the source, the files kept
// for review, and one table each for what was mapped, normalised and left out.
func (r *Report) README(title string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\nImported by `kubeplug import` from %s.\n", title, r.Source)
	b.WriteString("Review it before use: `kubeplug plugin lint` checks its form, not its intent.\n")
	if len(r.Original) > 0 {
		b.WriteString("\n## Original\n\nKept beside the plugin for review, never read by kubeplug:\n\n")
		for _, o := range r.Original {
			fmt.Fprintf(&b, "- %s\n", o)
		}
	}
	b.WriteString("\n## Mapped\n\n")
	if len(r.Mapped) == 0 {
		b.WriteString("Nothing.\n")
	} else {
		b.WriteString("| source | plugin |\n|---|---|\n")
		for _, m := range r.Mapped {
			fmt.Fprintf(&b, "| `%s` | %s |\n", cell(m.From), cell(m.To))
		}
	}
	if len(r.Normalised) > 0 {
		b.WriteString("\n## Normalised\n\n| field | original | now | rule |\n|---|---|---|---|\n")
		for _, n := range r.Normalised {
			fmt.Fprintf(&b, "| `%s` | `%s` | `%s` | %s |\n", cell(n.Field), cell(n.Original), cell(n.Value), cell(n.Rule))
		}
	}
	b.WriteString("\n## Not mapped\n\n")
	if len(r.Unmapped) == 0 {
		b.WriteString("Nothing: every field of the source has a place in the plugin.\n")
	} else {
		b.WriteString("These fields of the source are not in the plugin. Carry them over by hand where they matter.\n\n| field | why |\n|---|---|\n")
		for _, u := range r.Unmapped {
			fmt.Fprintf(&b, "| `%s` | %s |\n", cell(u.Field), cell(u.Why))
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return []byte(b.String())
}

// cell escapes text for a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
