// Command pause is the sandbox ("pause") container of the test node's pods: it holds the
// pod's namespaces, reaps orphaned children, and exits on SIGTERM or SIGINT. The upstream
// pause image comes from a registry this machine cannot reach, so the node builds its own.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for received := range signals {
		if received != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
