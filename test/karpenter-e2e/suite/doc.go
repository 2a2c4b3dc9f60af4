// Package suite holds nothing but the pins of tools.go.
package suite
