package userdata

import (
	"fmt"
	"strings"
)

// shellCommands splits a script into simple commands and their words the way
// a POSIX shell would before expansion: quotes ('...', "..." with backslash
// escapes), backslash-newline continuations, comments, and the separators
// newline, ';', '&&', '||' and '|'. Variables are left unexpanded; the
// bootstrap invocations written into user data pass literal values.
//
// powershell switches to PowerShell's quoting, where a doubled quote inside
// single quotes is a literal quote and the backtick escapes.
func shellCommands(script string, powershell bool) ([][]string, error) {
	var (
		cmds    [][]string
		words   []string
		cur     strings.Builder
		inWord  bool
		escape  = byte('\\')
		endWord = func() {
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		}
		endCmd = func() {
			endWord()
			if len(words) > 0 {
				cmds = append(cmds, words)
				words = nil
			}
		}
	)
	if powershell {
		escape = '`'
	}
	s := script
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == escape:
			if i+1 < len(s) {
				i++
				if s[i] == '\n' {
					continue // line continuation
				}
				if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
					i++
					continue
				}
				cur.WriteByte(s[i])
				inWord = true
			}
		case ch == '\'':
			inWord = true
			for {
				i++
				if i >= len(s) {
					return nil, fmt.Errorf("unterminated single quote")
				}
				if s[i] == '\'' {
					if powershell && i+1 < len(s) && s[i+1] == '\'' {
						cur.WriteByte('\'')
						i++
						continue
					}
					break
				}
				cur.WriteByte(s[i])
			}
		case ch == '"':
			inWord = true
			for {
				i++
				if i >= len(s) {
					return nil, fmt.Errorf("unterminated double quote")
				}
				if s[i] == escape && i+1 < len(s) && (powershell || strings.IndexByte("\"\\$`\n", s[i+1]) >= 0) {
					i++
					if s[i] != '\n' {
						cur.WriteByte(s[i])
					}
					continue
				}
				if s[i] == '"' {
					break
				}
				cur.WriteByte(s[i])
			}
		case ch == '#' && !inWord:
			for i < len(s) && s[i] != '\n' {
				i++
			}
			endCmd()
		case ch == '\n' || ch == ';':
			endCmd()
		case ch == '&' && i+1 < len(s) && s[i+1] == '&', ch == '|':
			if ch == '|' && i+1 < len(s) && s[i+1] == '|' {
				i++
			}
			if ch == '&' {
				i++
			}
			endCmd()
		case ch == ' ' || ch == '\t' || ch == '\r':
			endWord()
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	endCmd()
	return cmds, nil
}
