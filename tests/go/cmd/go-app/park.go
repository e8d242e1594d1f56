// SPDX-License-Identifier: MIT

// The park scenario: goroutines that wait where a server's do, each at a
// line marked `// park: KIND`, for `asynctraced tasks` to find (the tests
// read the lines from this file, not from a table). Each waiter is a
// function of its own, not inlined, as a server's handler is.
package main

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"asynctraced/gotests/internal/waiter"
)

//go:noinline
func parkChanRecv(c <-chan int) int {
	return <-c // park: chanrecv
}

//go:noinline
func parkSelect(a, b <-chan int) int {
	select { // park: select
	case v := <-a:
		return v
	case v := <-b:
		return v
	}
}

//go:noinline
func parkMutex(mu *sync.Mutex) {
	mu.Lock() // park: mutex
	mu.Unlock()
}

//go:noinline
func parkWaitGroup(wg *sync.WaitGroup) {
	wg.Wait() // park: waitgroup
}

//go:noinline
func parkNetRead(c net.Conn) {
	buf := make([]byte, 16)
	c.Read(buf) // park: netread
}

//go:noinline
func parkSleep() {
	time.Sleep(time.Hour) // park: sleep
}

//go:noinline
func parkSyscall(fd int) {
	buf := make([]byte, 16)
	syscall.Read(fd, buf) // park: syscall
}

//go:noinline
func parkDeep3(c <-chan int) int {
	return <-c // park: deep
}

//go:noinline
func parkDeep2(c <-chan int) int {
	return parkDeep3(c) + 1
}

//go:noinline
func parkDeep1(c <-chan int) int {
	return parkDeep2(c) + 1
}

// The other end of parkNetRead's connection: kept, or a collection would
// close it (its finalizer) and end the read.
var parkPeer net.Conn

// park starts the waiters, collects garbage twice once they wait (a
// collection notes since when a goroutine waits, as the time the one before
// it ended), says so on stderr, and returns; they wait until the program
// ends.
func park() {
	var mu sync.Mutex
	var wg sync.WaitGroup
	mu.Lock()
	wg.Add(1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		conn, _ := ln.Accept()
		accepted <- conn
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		panic(err)
	}
	parkPeer = <-accepted
	var pipe [2]int
	if err := syscall.Pipe(pipe[:]); err != nil {
		panic(err)
	}
	go parkChanRecv(make(chan int))
	go parkSelect(make(chan int), make(chan int))
	go parkMutex(&mu)
	go parkWaitGroup(&wg)
	go parkNetRead(conn)
	go parkSleep()
	go parkSyscall(pipe[0])
	go parkDeep1(make(chan int))
	go waiter.Recv(make(chan int))
	time.Sleep(100 * time.Millisecond)
	runtime.GC()
	runtime.GC()
	fmt.Fprintf(os.Stderr, "go-app: parked\n")
}
