package complete

import (
	"fmt"
	"strings"
)

// writeBash writes a bash completion function that walks the words typed
// so far to find the command being completed, then offers its flags,
// subcommands, arguments, or a flag's values. It needs bash 4 and nothing
// of the bash-completion package.
func writeBash(b *strings.Builder, root *node, prog string) {
	fn := "_" + root.id + "_complete"
	fmt.Fprintf(b, "# bash completion for %s. Generated from %s's command definitions: do not edit.\n", prog, prog)
	fmt.Fprintf(b, "# Install: source it from ~/.bashrc, or copy it to\n")
	fmt.Fprintf(b, "# ~/.local/share/bash-completion/completions/%s (bash-completion loads it on demand).\n\n", prog)
	fmt.Fprintf(b, "%s() {\n", fn)
	b.WriteString("    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n")
	fmt.Fprintf(b, "    local node=%s skip= i w flag\n", root.id)
	b.WriteString("    COMPREPLY=()\n")
	b.WriteString("    for ((i = 1; i < COMP_CWORD; i++)); do\n")
	b.WriteString("        w=${COMP_WORDS[i]}\n")
	b.WriteString("        if [[ $w == = ]]; then skip=1; continue; fi\n")
	b.WriteString("        if [[ -n $skip ]]; then skip=; continue; fi\n")
	b.WriteString("        if [[ $w == -- ]]; then\n")
	b.WriteString("            case $node in\n")
	var runners []string
	walk(root, func(n *node) {
		if n.commandArgs {
			runners = append(runners, n.id)
		}
	})
	if len(runners) > 0 {
		fmt.Fprintf(b, "            %s)\n", strings.Join(runners, "|"))
		b.WriteString("                if ((COMP_CWORD == i + 1)); then\n")
		b.WriteString("                    COMPREPLY=($(compgen -c -- \"$cur\"))\n")
		b.WriteString("                else\n")
		b.WriteString("                    compopt -o default 2>/dev/null\n")
		b.WriteString("                fi ;;\n")
	}
	b.WriteString("            esac\n")
	b.WriteString("            return 0\n")
	b.WriteString("        fi\n")
	b.WriteString("        case \"$node $w\" in\n")
	walk(root, func(n *node) {
		for _, s := range n.subs {
			var labels []string
			for _, name := range s.names {
				labels = append(labels, fmt.Sprintf("%q", n.id+" "+name))
			}
			fmt.Fprintf(b, "        %s) node=%s ;;\n", strings.Join(labels, "|"), s.id)
		}
	})
	for _, labels := range valuedFlagLabels(root, func(flag) bool { return true }) {
		fmt.Fprintf(b, "        %s) skip=1 ;;\n", strings.Join(labels, "|"))
	}
	b.WriteString("        esac\n")
	b.WriteString("    done\n")
	// --flag=value arrives as three words: --flag, =, value.
	b.WriteString("    flag=$prev\n")
	b.WriteString("    if [[ $cur == = ]]; then\n")
	b.WriteString("        cur=\n")
	b.WriteString("    elif [[ $prev == = ]]; then\n")
	b.WriteString("        flag=${COMP_WORDS[COMP_CWORD-2]}\n")
	b.WriteString("    fi\n")
	b.WriteString("    case \"$node $flag\" in\n")
	// Flags that take the same words share one case.
	var lists []string
	labelsOf := map[string][]string{}
	walk(root, func(n *node) {
		for _, f := range n.flags {
			if !f.value || len(f.values) == 0 {
				continue
			}
			list := strings.Join(f.values, " ")
			if _, ok := labelsOf[list]; !ok {
				lists = append(lists, list)
			}
			for _, s := range f.spelled() {
				labelsOf[list] = append(labelsOf[list], fmt.Sprintf("%q", n.id+" "+s))
			}
		}
	})
	for _, list := range lists {
		fmt.Fprintf(b, "        %s)\n", strings.Join(labelsOf[list], "|"))
		fmt.Fprintf(b, "            COMPREPLY=($(compgen -W %q -- \"$cur\"))\n", list)
		b.WriteString("            return 0 ;;\n")
	}
	// A value nothing can guess: offer nothing rather than file names.
	for _, labels := range valuedFlagLabels(root, func(f flag) bool { return len(f.values) == 0 }) {
		fmt.Fprintf(b, "        %s) return 0 ;;\n", strings.Join(labels, "|"))
	}
	b.WriteString("    esac\n")
	b.WriteString("    [[ $prev == = ]] && return 0\n")
	b.WriteString("    local flags= words=\n")
	b.WriteString("    case $node in\n")
	walk(root, func(n *node) {
		var flags, words []string
		for _, f := range n.flags {
			flags = append(flags, f.spelled()...)
		}
		for _, s := range n.subs {
			words = append(words, s.names[0])
		}
		words = append(words, n.args...)
		fmt.Fprintf(b, "    %s)\n", n.id)
		fmt.Fprintf(b, "        flags=%q\n", strings.Join(flags, " "))
		fmt.Fprintf(b, "        words=%q ;;\n", strings.Join(words, " "))
	})
	b.WriteString("    esac\n")
	b.WriteString("    if [[ $cur == -* ]]; then\n")
	b.WriteString("        COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n")
	b.WriteString("    else\n")
	b.WriteString("        COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n")
	b.WriteString("    fi\n")
	b.WriteString("    return 0\n")
	b.WriteString("}\n\n")
	fmt.Fprintf(b, "complete -F %s %s\n", fn, prog)
}

// valuedFlagLabels lists "node --flag" for every valued flag that keep
// selects, as quoted case labels, one group per node.
func valuedFlagLabels(root *node, keep func(flag) bool) [][]string {
	var groups [][]string
	walk(root, func(n *node) {
		var labels []string
		for _, f := range n.flags {
			if f.value && keep(f) {
				for _, s := range f.spelled() {
					labels = append(labels, fmt.Sprintf("%q", n.id+" "+s))
				}
			}
		}
		if len(labels) > 0 {
			groups = append(groups, labels)
		}
	})
	return groups
}
