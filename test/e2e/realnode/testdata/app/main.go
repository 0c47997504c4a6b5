// Command app is the workload of the real-node end-to-end test, run as an image
// built from this file: "serve" logs a greeting and serves HTTP on :8080 ("/"
// answers with the host name, "/exit" makes the process exit 1); "get URL"
// prints a URL's body (HTTPS without verifying the certificate); "echo ARGS" prints its arguments.
package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		os.Args = append(os.Args, "serve")
	}
	switch os.Args[1] {
	case "echo":
		fmt.Println(strings.Join(os.Args[2:], " "))
	case "get":
		// Services' own certificates are not what this test is about.
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // test workload

		resp, err := c.Get(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(os.Stdout, resp.Body)
	default:
		host, _ := os.Hostname()
		fmt.Println("hello from", host)
		http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "served by", host) })
		http.HandleFunc("/exit", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintln(w, "exiting")
			go func() { time.Sleep(100 * time.Millisecond); os.Exit(1) }()
		})
		if err := http.ListenAndServe(":8080", nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
