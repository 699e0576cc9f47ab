// A stand-in S3 Vectors endpoint that answers at once, so a benchmark measures the loader, not
// the service: GetIndex describes an index of -dimension floats, PutVectors reads the body and
// counts its vectors, GET /count tells how many arrived. Loopback only; signatures not checked.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
)

func main() {
	dimension := flag.Int("dimension", 1024, "dimension GetIndex reports")
	flag.Parse()
	var stored atomic.Int64
	http.HandleFunc("/GetIndex", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"index":{"dimension":%d,"distanceMetric":"cosine","dataType":"float32"}}`, *dimension)
	})
	http.HandleFunc("/PutVectors", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		stored.Add(int64(bytes.Count(body, []byte(`"key":`))))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{}")
	})
	http.HandleFunc("/count", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%d\n", stored.Load())
	})
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Printf("http://%s\n", listener.Addr())
	http.Serve(listener, nil)
}
