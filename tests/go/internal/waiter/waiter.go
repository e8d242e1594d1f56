// SPDX-License-Identifier: MIT

// Package waiter waits in a package of the program's own whose module path
// has no dot (asynctraced/gotests, as `go mod init myapp` makes one): where
// it waits is the program's code, not the standard library's.
package waiter

//go:noinline
func Recv(c <-chan int) int {
	return <-c // park: package
}
