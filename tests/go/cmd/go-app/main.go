// SPDX-License-Identifier: MIT

// go-app: the Go test program of asynctraced (issue 17). Each scenario is
// a pathology, or an everyday path, of Go's scheduler, run for a while on
// GOMAXPROCS Ps, and ends by printing the program's own counts, one line
// of key=value pairs, for the tests to hold the tracer's against.
//
//	cpu       a goroutine that burns 20 ms of CPU every 250 ms (a long poll,
//	          cpu-bound; over 10 ms, sysmon preempts it)
//	syscall   a goroutine blocked 20 ms in a raw nanosleep every 250 ms
//	gosyscall a goroutine that sleeps 20 ms in a system call the runtime
//	          knows of (its P handed off), then burns 20 ms of CPU making a
//	          system call every 50 µs (its P held throughout), every 250 ms
//	cpusyscall a goroutine whose one system call runs 30 ms or more on the
//	          CPU (a read of /dev/urandom, sized at start), every 250 ms:
//	          its P is taken by sysmon meanwhile (and, with -collect, by
//	          the stops of the world of a garbage collection every few
//	          ms); not in all
//	pingpong  two goroutines passing a token over unbuffered channels
//	timers    goroutines sleeping 1 ms, over and over
//	fanout    a parent spawning 16 children and waiting for them
//	          (sync.WaitGroup), over and over
//	leak      a goroutine parked forever on a channel nobody writes to,
//	          and one on a channel never made (nil)
//	park      goroutines waiting at known lines (park.go), for
//	          `asynctraced tasks`; not in all
//	all       all of the above at once, but cpusyscall and park
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

const (
	hiccupPeriod = 250 * time.Millisecond
	hiccupLength = 20 * time.Millisecond
)

type counts struct {
	burns, sleeps, pings, ticks, fanouts, children, gosyscalls int64
	cpusyscalls, cpusyscallLongestUs                           int64
}

var c counts

// spin burns the CPU for d, in the goroutine's own code.
//
//go:noinline
func spin(d time.Duration, seed uint64) uint64 {
	x := seed | 1
	for start := time.Now(); time.Since(start) < d; {
		for i := 0; i < 64; i++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
	}
	return x
}

func burnCPU(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	var x uint64
	for {
		select {
		case <-stop:
			return
		case <-time.After(hiccupPeriod):
		}
		x = spin(hiccupLength, x)
		atomic.AddInt64(&c.burns, 1)
	}
}

// rawSleep blocks its thread in the kernel without telling the scheduler
// (syscall.RawSyscall): the P stays held, as a blocking C call would.
//
//go:noinline
func rawSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
}

func blockInSyscall(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case <-stop:
			return
		case <-time.After(hiccupPeriod):
		}
		rawSleep(hiccupLength)
		atomic.AddInt64(&c.sleeps, 1)
	}
}

// syscallSleep sleeps in a system call the runtime is told of
// (syscall.Syscall: entersyscall, then sysmon hands its P to another M).
//
//go:noinline
func syscallSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	syscall.Syscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// spinSyscalls burns the CPU for d with a short system call every 50 µs:
// too short for sysmon to take the P, which the goroutine holds throughout.
//
//go:noinline
func spinSyscalls(d time.Duration, seed uint64) uint64 {
	x := seed
	for start := time.Now(); time.Since(start) < d; {
		x = spin(50*time.Microsecond, x)
		syscall.Syscall(syscall.SYS_GETPID, 0, 0, 0)
	}
	return x
}

func sleepThenBurn(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	var x uint64
	for {
		select {
		case <-stop:
			return
		case <-time.After(hiccupPeriod):
		}
		syscallSleep(hiccupLength)
		x = spinSyscalls(hiccupLength, x)
		atomic.AddInt64(&c.gosyscalls, 1)
	}
}

// randomRead reads len(buf) bytes of /dev/urandom in one system call the
// runtime is told of: all of it on the CPU, in the kernel (the kernel makes
// them: a few hundred MB a second). Returns how long it took.
//
//go:noinline
func randomRead(fd int, buf []byte) time.Duration {
	start := time.Now()
	if _, err := syscall.Read(fd, buf); err != nil {
		fmt.Fprintln(os.Stderr, "go-app: read /dev/urandom:", err)
		os.Exit(1)
	}
	return time.Since(start)
}

// cpuSyscallBuffer opens /dev/urandom and sizes a buffer one read of which
// takes 30 ms at least: done before the tracer attaches (its allocations and
// first reads, page faults and a collection, are not what is measured).
func cpuSyscallBuffer() (int, []byte) {
	fd, err := syscall.Open("/dev/urandom", syscall.O_RDONLY, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "go-app: open /dev/urandom:", err)
		os.Exit(1)
	}
	buf := make([]byte, 4<<20)
	randomRead(fd, buf)
	for randomRead(fd, buf) < 30*time.Millisecond && len(buf) < 1<<30 {
		buf = make([]byte, 2*len(buf))
		randomRead(fd, buf)
	}
	runtime.GC()
	return fd, buf
}

// garbage keeps collect's allocations from being optimised away.
var garbage []byte

// collect allocates 4 MB every 5 ms with the collector's target at 10%: a
// garbage collection every few allocations, whose stops of the world take
// the P of a goroutine in a system call too, sysmon or not.
func collect(stop <-chan struct{}) {
	debug.SetGCPercent(10)
	for {
		select {
		case <-stop:
			return
		case <-time.After(5 * time.Millisecond):
		}
		garbage = make([]byte, 4<<20)
	}
}

// collecting: -collect, cpusyscall with garbage collections beside it.
var collecting bool

func cpuSyscalls(stop <-chan struct{}, wg *sync.WaitGroup, fd int, buf []byte) {
	defer wg.Done()
	if collecting {
		go collect(stop)
	}
	for {
		select {
		case <-stop:
			return
		case <-time.After(hiccupPeriod):
		}
		took := randomRead(fd, buf).Microseconds()
		atomic.AddInt64(&c.cpusyscalls, 1)
		if took > atomic.LoadInt64(&c.cpusyscallLongestUs) {
			atomic.StoreInt64(&c.cpusyscallLongestUs, took)
		}
	}
}

func pingPong(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	ping, pong := make(chan int), make(chan int)
	go func() {
		for v := range ping {
			pong <- v + 1
		}
		close(pong)
	}()
	for v := 0; ; {
		select {
		case <-stop:
			close(ping)
			return
		case ping <- v:
		}
		v = <-pong
		atomic.AddInt64(&c.pings, 1)
	}
}

func timers(stop <-chan struct{}, done *sync.WaitGroup) {
	defer done.Done()
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
					atomic.AddInt64(&c.ticks, 1)
				}
			}
		}()
	}
	wg.Wait()
}

func child(wg *sync.WaitGroup, n int) {
	defer wg.Done()
	spin(20*time.Microsecond, uint64(n))
	atomic.AddInt64(&c.children, 1)
}

func fanOut(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case <-stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
		var wg sync.WaitGroup
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go child(&wg, i)
		}
		wg.Wait()
		atomic.AddInt64(&c.fanouts, 1)
	}
}

// leaked waits for a value nobody will ever send.
func leaked(never <-chan int) {
	<-never // leak: chan
}

// leakedOnNil waits on a channel never made: nothing can ever wake it.
func leakedOnNil() {
	var never chan int
	<-never // leak: nil
}

func main() {
	scenario := flag.String("scenario", "all",
		"cpu, syscall, gosyscall, cpusyscall, pingpong, timers, fanout, leak, park or all")
	duration := flag.Duration("duration", 3*time.Second, "how long to run")
	procs := flag.Int("procs", 2, "GOMAXPROCS: the Ps, the workers")
	waitStdin := flag.Bool("wait-stdin", false, "start once a line (or EOF) is read from stdin")
	idle := flag.Int("idle", 0, "goroutines parked for good beside the scenario (make bench: tasks)")
	flag.BoolVar(&collecting, "collect", false,
		"cpusyscall: a garbage collection every few ms beside it")
	flag.Parse()
	runtime.GOMAXPROCS(*procs)
	var randomFd int
	var randomBuf []byte
	if *scenario == "cpusyscall" {
		randomFd, randomBuf = cpuSyscallBuffer()
	}
	if *waitStdin {
		var line string
		fmt.Fscanln(os.Stdin, &line)
	}
	fmt.Fprintf(os.Stderr, "go-app: pid %d scenario %s procs %d\n", os.Getpid(), *scenario, *procs)
	if *idle > 0 {
		never := make(chan int)
		for i := 0; i < *idle; i++ {
			go parkChanRecv(never)
		}
		fmt.Fprintf(os.Stderr, "go-app: %d idle\n", *idle)
	}

	// Each scenario is a goroutine started in its own function, as servers
	// start theirs (go handleConn(c)): the tracer names it by that function.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	all := *scenario == "all"
	known := all
	run := func(name string) bool {
		if all || *scenario == name {
			known = true
			wg.Add(1)
			return true
		}
		return false
	}
	if run("cpu") {
		go burnCPU(stop, &wg)
	}
	if run("syscall") {
		go blockInSyscall(stop, &wg)
	}
	if run("gosyscall") {
		go sleepThenBurn(stop, &wg)
	}
	if *scenario == "cpusyscall" {
		known = true
		wg.Add(1)
		go cpuSyscalls(stop, &wg, randomFd, randomBuf)
	}
	if run("pingpong") {
		go pingPong(stop, &wg)
	}
	if run("timers") {
		go timers(stop, &wg)
	}
	if run("fanout") {
		go fanOut(stop, &wg)
	}
	if all || *scenario == "leak" {
		known = true
		go leaked(make(chan int))
		go leakedOnNil()
	}
	if *scenario == "park" {
		known = true
		park()
	}
	if !known {
		fmt.Fprintf(os.Stderr, "go-app: unknown scenario %q\n", *scenario)
		os.Exit(2)
	}
	began := time.Now()
	time.Sleep(*duration)
	close(stop)
	wg.Wait()
	// ops: the scenarios' units of work (round trips, ticks, children), for
	// make bench's throughput
	fmt.Printf("burns=%d sleeps=%d pings=%d ticks=%d fanouts=%d children=%d gosyscalls=%d "+
		"cpusyscalls=%d cpusyscall_longest_us=%d ops=%d duration=%.3f\n",
		c.burns, c.sleeps, c.pings, c.ticks, c.fanouts, c.children, c.gosyscalls,
		c.cpusyscalls, c.cpusyscallLongestUs, c.pings+c.ticks+c.children,
		time.Since(began).Seconds())
}
