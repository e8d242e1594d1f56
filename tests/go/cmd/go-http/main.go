// SPDX-License-Identifier: MIT

// go-http: the Go HTTP server of asynctraced's benchmarks (issue 30). Each
// request to / costs a little work (a few microseconds of hashing, as a
// small handler does); with -noisy, one request in -noisy-every to /
// burns 30 ms on its goroutine (a handler that hogs its P), the
// noisy-neighbour case sample mode must find. Prints "listening on PORT".
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync/atomic"
	"time"
)

var served uint64

// work hashes for about d: the handler's own CPU time.
//
//go:noinline
func work(d time.Duration, seed uint64) uint64 {
	x := seed | 1
	for start := time.Now(); time.Since(start) < d; {
		for i := 0; i < 32; i++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
	}
	return x
}

// burn30ms is the noisy path, named so that an alert says which it is.
//
//go:noinline
func burn30ms(seed uint64) uint64 {
	return work(30*time.Millisecond, seed)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "where to listen")
	each := flag.Duration("work", 5*time.Microsecond, "work per request")
	noisyEvery := flag.Uint64("noisy-every", 0, "one request in N burns 30 ms (0: none)")
	procs := flag.Int("procs", 0, "GOMAXPROCS (0: Go's default)")
	flag.Parse()
	if *procs > 0 {
		runtime.GOMAXPROCS(*procs)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "go-http:", err)
		os.Exit(1)
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		n := atomic.AddUint64(&served, 1)
		var x uint64
		if *noisyEvery > 0 && n%*noisyEvery == 0 {
			x = burn30ms(n)
		} else {
			x = work(*each, n)
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "ok %d\n", x&0xff)
	})
	fmt.Printf("listening on %d\n", ln.Addr().(*net.TCPAddr).Port)
	os.Stdout.Sync()
	if err := http.Serve(ln, nil); err != nil {
		fmt.Fprintln(os.Stderr, "go-http:", err)
		os.Exit(1)
	}
}
