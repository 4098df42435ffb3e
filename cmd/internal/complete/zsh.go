package complete

import (
	"fmt"
	"strings"
)

// writeZsh writes a zsh completion function per command, built on
// _arguments, with each flag's and command's usage as its description.
func writeZsh(b *strings.Builder, root *node, prog string) {
	fmt.Fprintf(b, "#compdef %s\n", prog)
	fmt.Fprintf(b, "# zsh completion for %s. Generated from %s's command definitions: do not edit.\n", prog, prog)
	fmt.Fprintf(b, "# Install: copy it as _%s into a directory of $fpath (for example ~/.zfunc, with\n", prog)
	b.WriteString("# fpath=(~/.zfunc $fpath) before compinit in ~/.zshrc), or source it after compinit.\n")
	walk(root, func(n *node) {
		b.WriteString("\n")
		writeZshNode(b, n, prog)
	})
	fn := "_" + root.id
	b.WriteString("\n")
	fmt.Fprintf(b, "if [[ $funcstack[1] == %s ]]; then\n", fn)
	fmt.Fprintf(b, "  %s \"$@\"\n", fn)
	b.WriteString("else\n")
	fmt.Fprintf(b, "  compdef %s %s\n", fn, prog)
	b.WriteString("fi\n")
}

func writeZshNode(b *strings.Builder, n *node, prog string) {
	fmt.Fprintf(b, "_%s() {\n", n.id)
	specs := zshFlagSpecs(n)
	if len(n.subs) == 0 {
		switch {
		case n.commandArgs:
			specs = append(specs, `'(-)1:command: _command_names -e'`, `'*::arguments: _normal'`)
		case len(n.args) > 0:
			specs = append(specs, fmt.Sprintf("'*:argument:(%s)'", strings.Join(n.args, " ")))
		}
		if len(specs) == 0 {
			b.WriteString("  _message 'no arguments'\n}\n")
			return
		}
		b.WriteString("  _arguments -S \\\n    " + strings.Join(specs, " \\\n    ") + "\n}\n")
		return
	}
	b.WriteString("  local curcontext=\"$curcontext\" state line ret=1\n")
	b.WriteString("  typeset -A opt_args\n")
	specs = append(specs, "'1: :->command'", "'*:: :->args'")
	b.WriteString("  _arguments -C -S \\\n    " + strings.Join(specs, " \\\n    ") + " && ret=0\n")
	b.WriteString("  case $state in\n")
	b.WriteString("    (command)\n")
	b.WriteString("      local -a commands\n")
	b.WriteString("      commands=(\n")
	for _, s := range n.subs {
		fmt.Fprintf(b, "        %s\n", zshQuote(strings.ReplaceAll(s.names[0], ":", `\:`)+":"+s.usage))
	}
	b.WriteString("      )\n")
	title := strings.TrimSpace(prog + " " + n.path)
	fmt.Fprintf(b, "      _describe -t commands %s commands && ret=0 ;;\n", zshQuote(title+" command"))
	b.WriteString("    (args)\n")
	fmt.Fprintf(b, "      curcontext=\"${curcontext%%:*:*}:%s-$words[1]:\"\n", n.id)
	b.WriteString("      case $words[1] in\n")
	for _, s := range n.subs {
		fmt.Fprintf(b, "        (%s) _%s && ret=0 ;;\n", strings.Join(s.names, "|"), s.id)
	}
	b.WriteString("      esac ;;\n")
	b.WriteString("  esac\n")
	b.WriteString("  return ret\n")
	b.WriteString("}\n")
}

// zshFlagSpecs are the _arguments specs of n's flags.
func zshFlagSpecs(n *node) []string {
	var specs []string
	for _, f := range n.flags {
		desc := "[" + zshDesc(f.usage) + "]"
		var arg string
		if f.value {
			hint := f.hint
			if hint == "" {
				hint = "value"
			}
			action := " "
			if len(f.values) > 0 {
				action = "(" + strings.Join(f.values, " ") + ")"
			}
			arg = ":" + zshDesc(hint) + ":" + action
		}
		spelled := f.spelled()
		if f.value {
			for i := range spelled {
				spelled[i] += "="
			}
		}
		if len(spelled) == 1 {
			specs = append(specs, zshQuote(spelled[0]+desc+arg))
			continue
		}
		excl := "(" + strings.Join(f.spelled(), " ") + ")"
		specs = append(specs, zshQuote(excl)+"{"+strings.Join(spelled, ",")+"}"+zshQuote(desc+arg))
	}
	return specs
}

// zshDesc escapes what _arguments reads specially in a description or a
// message.
func zshDesc(s string) string {
	return strings.NewReplacer(`\`, `\\`, "[", `\[`, "]", `\]`, ":", `\:`).Replace(s)
}

// zshQuote single-quotes s for zsh.
func zshQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
