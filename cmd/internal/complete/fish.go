package complete

import (
	"fmt"
	"strings"
)

// writeFish writes fish completions: a function that finds the command
// being typed, and one `complete` line per subcommand, flag and argument
// conditioned on it.
func writeFish(b *strings.Builder, root *node, prog string) {
	nodeFn := "__" + root.id + "_node"
	isFn := "__" + root.id + "_is"
	fmt.Fprintf(b, "# fish completion for %s. Generated from %s's command definitions: do not edit.\n", prog, prog)
	fmt.Fprintf(b, "# Install: copy it to ~/.config/fish/completions/%s.fish\n\n", prog)

	fmt.Fprintf(b, "function %s --description 'the %s command being typed'\n", nodeFn, prog)
	b.WriteString("    set -l words (commandline -opc)\n")
	fmt.Fprintf(b, "    set -l node %s\n", root.id)
	b.WriteString("    set -l skip 0\n")
	b.WriteString("    for w in $words[2..-1]\n")
	b.WriteString("        if test $skip = 1\n")
	b.WriteString("            set skip 0\n")
	b.WriteString("            continue\n")
	b.WriteString("        end\n")
	b.WriteString("        switch \"$node $w\"\n")
	walk(root, func(n *node) {
		for _, s := range n.subs {
			var labels []string
			for _, name := range s.names {
				labels = append(labels, fishQuote(n.id+" "+name))
			}
			fmt.Fprintf(b, "            case %s\n", strings.Join(labels, " "))
			fmt.Fprintf(b, "                set node %s\n", s.id)
		}
		var valued []string
		for _, f := range n.flags {
			if f.value {
				for _, s := range f.spelled() {
					valued = append(valued, fishQuote(n.id+" "+s))
				}
			}
		}
		if len(valued) > 0 {
			fmt.Fprintf(b, "            case %s\n", strings.Join(valued, " "))
			b.WriteString("                set skip 1\n")
		}
		if n.commandArgs {
			fmt.Fprintf(b, "            case %s\n", fishQuote(n.id+" --"))
			fmt.Fprintf(b, "                echo %s--\n", n.id)
			b.WriteString("                return\n")
		}
	})
	b.WriteString("        end\n")
	b.WriteString("    end\n")
	b.WriteString("    echo $node\n")
	b.WriteString("end\n\n")
	fmt.Fprintf(b, "function %s --description 'is the %s command being typed $argv[1]?'\n", isFn, prog)
	fmt.Fprintf(b, "    test (%s) = $argv[1]\n", nodeFn)
	b.WriteString("end\n\n")

	fmt.Fprintf(b, "complete -c %s -f\n", prog)
	walk(root, func(n *node) {
		b.WriteString("\n")
		cond := fishQuote(isFn + " " + n.id)
		for _, s := range n.subs {
			fmt.Fprintf(b, "complete -c %s -n %s -a %s -d %s\n", prog, cond, s.names[0], fishQuote(s.usage))
		}
		if len(n.args) > 0 {
			fmt.Fprintf(b, "complete -c %s -n %s -a %s\n", prog, cond, fishQuote(strings.Join(n.args, " ")))
		}
		for _, f := range n.flags {
			var opts []string
			for _, name := range f.names {
				if len(name) == 1 {
					opts = append(opts, "-s "+name)
				} else {
					opts = append(opts, "-l "+name)
				}
			}
			if f.value {
				opts = append(opts, "-x")
				if len(f.values) > 0 {
					opts = append(opts, "-a "+fishQuote(strings.Join(f.values, " ")))
				}
			}
			fmt.Fprintf(b, "complete -c %s -n %s %s -d %s\n", prog, cond, strings.Join(opts, " "), fishQuote(f.usage))
		}
		if n.commandArgs {
			after := fishQuote(isFn + " " + n.id + "--")
			fmt.Fprintf(b, "complete -c %s -n %s -F -a '(__fish_complete_command)'\n", prog, after)
		}
	})
}

// fishQuote single-quotes s for fish.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}
