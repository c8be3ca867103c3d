// Package abuse attacks a real `extenddb serve` process with clients that
// hold connections (bodies sent and stalled, responses never read) and
// checks that the server's memory stays bounded, that ordinary requests
// keep their latency, and that memory returns once the attackers leave.
//
// The attackers run in a second process (TestAbuser, started by
// TestAbuse), as they would on other machines. The test takes about a
// minute and loads the machine, so it runs only when EXTENDDB_TEST_ABUSE=1
// (scripts/test-all.sh sets it). EXTENDDB_BIN names the binary to serve
// (default: built from this checkout).
package abuse

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

const (
	keyID  = "AKIDEXTENDDBABUSE001"
	secret = "extenddb-abuse-test-secret-0001"

	stallers     = 200      // connections that send 15 MB and stall
	stallBytes   = 15 << 20 // what each sends of its declared body
	nonReaders   = 50       // connections that never read a large reply
	bigItems     = 45       // ~390 KB items: a BatchGetItem reply of ~16 MB
	bigItemBytes = 390 << 10
	// The attack lasts long enough for abuseSamples on a slowed host too
	// (~9 s at full speed, 3 s of onset before it; a host at half speed
	// needs more than the 17 s a 20 s attack leaves).
	abuseFor = 30 * time.Second
	settle   = 30 * time.Second
	// Ordinary requests per latency measurement. The attack comes in
	// cycles of ~1.5 s (the stallers reconnect together a second after
	// being cut), each with two bursts of 200 connections; a window of
	// one cycle holds one of each, and its p99 depends on where they
	// fall. abuseSamples (~9 s, six cycles) make it the attack's p99.
	// The idle p99 is taken over idleSamples (~6 s) before the attack and
	// as many after: on a machine shared with other work, a p99 over 3 s
	// swings by half from one run to the next (ratios from 0.77 to 2.26
	// on one host, the server unchanged).
	idleSamples  = 16000
	abuseSamples = 24000

	maxRSS = 512 << 20
)

// Short deadlines so that the test runs quickly.
const serverConfig = `
[server]
listen = "%s"
read_header_timeout = "3s"
body_read_timeout = "3s"
write_timeout = "3s"
idle_timeout = "10s"
inflight_wait = "500ms"

[storage]
memory = true

[[auth.keys]]
access_key_id = "` + keyID + `"
secret_access_key = "` + secret + `"
`

func TestAbuse(t *testing.T) {
	if os.Getenv("EXTENDDB_TEST_ABUSE") != "1" {
		t.Skip("set EXTENDDB_TEST_ABUSE=1 to run the abuse test (make test-all does)")
	}
	bin := os.Getenv("EXTENDDB_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "extenddb")
		build := exec.Command("go", "build", "-o", bin, "./cmd/extenddb")
		build.Dir = "../.."
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	addr := freeAddr(t)
	cfgPath := filepath.Join(t.TempDir(), "extenddb.toml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(serverConfig, addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	var logBuf bytes.Buffer
	cmd := exec.Command(bin, "serve", "--config", cfgPath, "--log-level", "warn")
	cmd.Stderr = &logBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("server log (tail):\n%s", tail(logBuf.String(), 3000))
		}
	})
	endpoint := "http://" + addr
	waitHealthy(t, endpoint)
	pid := cmd.Process.Pid

	ctx := context.Background()
	c := dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(endpoint), Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(keyID, secret, ""),
		Retryer:     aws.NopRetryer{},
	})
	table := "abuse"
	if _, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(table), BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
	}); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", bigItemBytes)
	var keys []string
	for i := 0; i < bigItems; i++ {
		k := "big" + strconv.Itoa(i)
		keys = append(keys, k)
		if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: k}, "v": &types.AttributeValueMemberS{Value: big}}}); err != nil {
			t.Fatal(err)
		}
	}
	// The reply really is large.
	bg, err := c.BatchGetItem(ctx, batchGetInput(table, keys))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(bg.Responses[table]); n < 35 {
		t.Fatalf("BatchGetItem returned %d big items", n)
	}

	// Idle: latency of ordinary requests and memory.
	time.Sleep(7 * time.Second) // the server returns memory after large requests
	idleRSS := rss(t, pid)

	// Sixteen 15 MB requests, one after the other (refused: an item is
	// at most 400 KB, but read and decoded in full): memory comes back.
	huge := signedRaw(t, addr, "PutItem", hugePut(table))
	for i := 0; i < 16; i++ {
		if st := exchange(t, addr, huge); st != 400 {
			t.Fatalf("15 MB PutItem: status %d", st)
		}
	}
	afterHuge := rss(t, pid)
	if r, took := settled(t, pid, idleRSS, 7*time.Second); float64(r) > 1.2*float64(idleRSS) {
		t.Errorf("RSS %d MiB 7 s after 16 × 15 MB requests (%d MiB right after), idle %d MiB", r>>20, afterHuge>>20, idleRSS>>20)
	} else {
		t.Logf("16 × 15 MB requests: RSS %d MiB right after, %d MiB %v later (idle %d MiB)", afterHuge>>20, r>>20, took, idleRSS>>20)
	}
	// The measuring client's own heap is a few MB: at the default GOGC
	// it collects every ~30 ms, and its stop-the-world pauses land in the
	// latencies it records. Collect rarely, so that they measure the
	// server.
	defer debug.SetGCPercent(debug.SetGCPercent(2000))
	// One round: the idle p99, the attack with every check of it, the
	// idle p99 again. The machine is shared (other processes come and
	// go): the mean of the two idle p99s is the reference.
	round := func() (time.Duration, time.Duration, time.Duration) {
		cpu0 := cpuTime(t, pid)
		idleP99, errs := measure(ctx, c, table, idleSamples)
		if errs > 0 {
			t.Fatalf("%d ordinary requests failed when idle", errs)
		}
		t.Logf("idle: RSS %d MiB, p99 %v (server CPU %v)", idleRSS>>20, idleP99, cpuTime(t, pid)-cpu0)

		// Abuse, from another process (as attackers would be: their
		// goroutines must not delay this process's ordinary client).
		abuser := exec.Command(os.Args[0], "-test.run=^TestAbuser$", "-test.v")
		abuser.Env = append(os.Environ(), "EXTENDDB_ABUSER_ADDR="+addr, "EXTENDDB_ABUSER_TABLE="+table)
		var abuserOut bytes.Buffer
		abuser.Stdout, abuser.Stderr = &abuserOut, &abuserOut
		// Closing its stdin ends the attack early, once measured.
		stopAbuse, err := abuser.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := abuser.Start(); err != nil {
			t.Fatal(err)
		}
		abuseStart := time.Now()
		var peak atomic.Int64
		sampler := make(chan struct{})
		samplerDone := make(chan struct{})
		go func() {
			defer close(samplerDone)
			for {
				if r := rss(t, pid); r > peak.Load() {
					peak.Store(r)
				}
				select {
				case <-sampler:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
		time.Sleep(3 * time.Second) // let the abusers take hold
		cpu0, self0 := cpuTime(t, pid), selfCPU()
		abuseP99, errs := measure(ctx, c, table, abuseSamples)
		t.Logf("while measuring under abuse: server CPU %v, test process CPU %v", cpuTime(t, pid)-cpu0, selfCPU()-self0)
		t.Logf("under abuse: p99 %v, %d ordinary requests failed", abuseP99, errs)
		if time.Since(abuseStart) > abuseFor-time.Second {
			t.Errorf("the measurement outlasted the abuse")
		}
		stopAbuse.Close()
		if err := abuser.Wait(); err != nil {
			t.Fatalf("abuser: %v\n%s", err, abuserOut.String())
		}
		t.Logf("abuser process: CPU %v; %s", abuser.ProcessState.UserTime()+abuser.ProcessState.SystemTime(), strings.TrimSpace(abuseLine2(abuserOut.String())))
		close(sampler)
		<-samplerDone
		var cycles, throttled, timedOut int64
		if _, err := fmt.Sscanf(abuseLine(abuserOut.String()), "abuse: %d %d %d", &cycles, &throttled, &timedOut); err != nil {
			t.Fatalf("abuser output: %v\n%s", err, abuserOut.String())
		}
		t.Logf("abuse: %d connections, %d answered ThrottlingException, %d RequestTimeoutException; peak RSS %d MiB",
			cycles, throttled, timedOut, peak.Load()>>20)
		if errs > 0 {
			t.Errorf("%d ordinary requests failed under abuse", errs)
		}
		if peak.Load() >= maxRSS {
			t.Errorf("peak RSS %d MiB, want under %d MiB", peak.Load()>>20, maxRSS>>20)
		}
		if throttled == 0 || timedOut == 0 {
			t.Errorf("the abusers were neither throttled nor timed out: %d, %d", throttled, timedOut)
		}

		after, took := settled(t, pid, idleRSS, settle)
		t.Logf("%v after the abusers left: RSS %d MiB (idle %d MiB)", took, after>>20, idleRSS>>20)
		if float64(after) > 1.2*float64(idleRSS) {
			t.Errorf("RSS %d MiB %v after the abuse, more than 20%% over the idle %d MiB", after>>20, settle, idleRSS>>20)
		}
		idleAfter, errs := measure(ctx, c, table, idleSamples)
		if errs > 0 {
			t.Errorf("%d ordinary requests failed after the abuse", errs)
		}
		return idleP99, abuseP99, idleAfter
	}
	// The p99 bound: under abuse at most twice the idle reference. A
	// round whose p99s a neighbour's load skewed (as a CI run's other
	// builds do) is not the server's verdict: when the first round is
	// over the bound, two more run and the median ratio of the three
	// decides, so an attack that really slows ordinary requests still
	// fails, and one noisy round does not.
	var ratios []float64
	for i := 1; i <= 3; i++ {
		idleP99, abuseP99, idleAfter := round()
		ref := (idleP99 + idleAfter) / 2
		ratio := float64(abuseP99) / float64(ref)
		ratios = append(ratios, ratio)
		t.Logf("round %d p99: idle before %v, under abuse %v, idle after %v: %.2fx the mean idle", i, idleP99, abuseP99, idleAfter, ratio)
		if t.Failed() || i == 1 && ratio <= 2 {
			return
		}
	}
	sort.Float64s(ratios)
	if ratios[1] > 2 {
		t.Errorf("p99 under abuse: median %.2fx the idle p99 over three rounds (%.2f), more than twice", ratios[1], ratios)
	}
}

// settled waits up to limit for the server's RSS to come within 20% of
// idle, and answers it and how long that took (limit: the RSS then).
func settled(t *testing.T, pid int, idle int64, limit time.Duration) (int64, time.Duration) {
	start := time.Now()
	for {
		r := rss(t, pid)
		took := time.Since(start)
		if float64(r) <= 1.2*float64(idle) || took >= limit {
			return r, took.Round(100 * time.Millisecond)
		}
		time.Sleep(min(500*time.Millisecond, limit-took))
	}
}

// TestAbuser is the attacking process of TestAbuse (run by it).
func TestAbuser(t *testing.T) {
	addr, table := os.Getenv("EXTENDDB_ABUSER_ADDR"), os.Getenv("EXTENDDB_ABUSER_TABLE")
	if addr == "" {
		t.Skip("run by TestAbuse")
	}
	ctx, stop := context.WithTimeout(context.Background(), abuseFor)
	defer stop()
	go func() {
		// TestAbuse closes stdin once it has measured.
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	var keys []string
	for i := 0; i < bigItems; i++ {
		keys = append(keys, "big"+strconv.Itoa(i))
	}
	var wg sync.WaitGroup
	var cycles, throttled, timedOut atomic.Int64
	stallReq := signedStall(t, addr, table)
	for i := 0; i < stallers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			staller(ctx, addr, stallReq, &cycles, &throttled, &timedOut)
		}()
	}
	bgReq := signedRaw(t, addr, "BatchGetItem", batchGetBody(table, keys))
	for i := 0; i < nonReaders; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nonReader(ctx, addr, bgReq, &cycles)
		}()
	}
	wg.Wait()
	fmt.Printf("abuse: %d %d %d\n", cycles.Load(), throttled.Load(), timedOut.Load())
	fmt.Printf("stallers sent %d MiB\n", bytesSent.Load()>>20)
}

var bytesSent atomic.Int64

func abuseLine2(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "stallers sent") {
			return l
		}
	}
	return ""
}

func abuseLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "abuse: ") {
			return l
		}
	}
	return ""
}

// staller: connect, declare a body of 15 MB + 1 KB signed over its real
// hash, send 15 MB of it, stall; when the server answers or cuts the
// connection, pause a second and do it again.
func staller(ctx context.Context, addr string, head []byte, cycles, throttled, timedOut *atomic.Int64) {
	payload := make([]byte, 64<<10)
	for ctx.Err() == nil {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			sleep(ctx, time.Second)
			continue
		}
		cycles.Add(1)
		if tc, ok := conn.(*net.TCPConn); ok {
			// What the server does not read stays in this socket's send
			// buffer, which Linux grows to 4 MB. Each throttled cycle
			// then copies ~4 MB into it only to drop them when the server
			// closes: ~10 GB in 20 s and ~3 s of this process's CPU, in
			// bursts every cycle, on the machine whose latency the test
			// measures. A remote attacker pays that on its own machine,
			// and the server sees the same thing either way (its receive
			// window bounds what reaches it), so keep the buffer small.
			_ = tc.SetWriteBuffer(64 << 10)
		}
		stopped := context.AfterFunc(ctx, func() { conn.Close() })
		answer := make(chan string, 1)
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				answer <- ""
				return
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			answer <- string(b)
			conn.Close()
		}()
		_, err = conn.Write(head)
		for sent := 0; err == nil && sent < stallBytes; sent += len(payload) {
			var n int
			n, err = conn.Write(payload)
			bytesSent.Add(int64(n))
		}
		a := <-answer // stall until answered or cut
		switch {
		case strings.Contains(a, "ThrottlingException"):
			throttled.Add(1)
		case strings.Contains(a, "RequestTimeoutException"):
			timedOut.Add(1)
		}
		stopped()
		conn.Close()
		sleep(ctx, time.Second)
	}
}

// nonReader: ask for a ~16 MB BatchGetItem reply and never read it; once
// the server has given up on it, do it again.
func nonReader(ctx context.Context, addr string, req []byte, cycles *atomic.Int64) {
	for ctx.Err() == nil {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			sleep(ctx, time.Second)
			continue
		}
		cycles.Add(1)
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(64 << 10) // hold the reply in the server, not in our kernel buffer
		}
		_, _ = conn.Write(req)
		sleep(ctx, 5*time.Second)
		conn.Close()
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// measure runs n ordinary requests (alternating a 1 KB PutItem and a
// GetItem) and returns their p99 and the number that failed.
func measure(ctx context.Context, c *dynamodb.Client, table string, n int) (time.Duration, int) {
	small := strings.Repeat("s", 1024)
	var lat []time.Duration
	errs := 0
	for i := 0; i < n; i++ {
		k := &types.AttributeValueMemberS{Value: "small" + strconv.Itoa(i%20)}
		start := time.Now()
		var err error
		if i%2 == 0 {
			_, err = c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
				"pk": k, "v": &types.AttributeValueMemberS{Value: small}}})
		} else {
			_, err = c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{"pk": k}})
		}
		lat = append(lat, time.Since(start))
		if err != nil {
			if errs == 0 {
				fmt.Printf("ordinary request failed: %v\n", err)
			}
			errs++
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if testing.Verbose() {
		fmt.Printf("latency: p50 %v p90 %v p99 %v max %v\n", lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)*99/100], lat[len(lat)-1])
	}
	return lat[len(lat)*99/100], errs
}

func batchGetInput(table string, keys []string) *dynamodb.BatchGetItemInput {
	var ks []map[string]types.AttributeValue
	for _, k := range keys {
		ks = append(ks, map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: k}})
	}
	return &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{table: {Keys: ks}}}
}

func batchGetBody(table string, keys []string) []byte {
	var parts []string
	for _, k := range keys {
		parts = append(parts, `{"pk":{"S":"`+k+`"}}`)
	}
	return []byte(`{"RequestItems":{"` + table + `":{"Keys":[` + strings.Join(parts, ",") + `]}}}`)
}

// hugePut is a 15 MB PutItem body.
func hugePut(table string) []byte {
	return []byte(`{"TableName":"` + table + `","Item":{"pk":{"S":"huge"},"v":{"S":"` + strings.Repeat("h", stallBytes) + `"}}}`)
}

// exchange sends a whole request on a fresh connection and returns the
// response status.
func exchange(t *testing.T, addr string, req []byte) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write(req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// signedRaw renders a whole signed request.
func signedRaw(t *testing.T, addr, op string, body []byte) []byte {
	t.Helper()
	head := signedHead(t, addr, op, body, int64(len(body)))
	return append(head, body...)
}

// signedStall is the head of a PutItem whose declared body (15 MB + 1 KB)
// is signed over its real hash; the stallers send only 15 MB of it.
func signedStall(t *testing.T, addr, table string) []byte {
	t.Helper()
	prefix := `{"TableName":"` + table + `","Item":{"pk":{"S":"stall"},"v":{"S":"`
	suffix := `"}}}`
	n := stallBytes + 1024
	body := make([]byte, 0, n)
	body = append(body, prefix...)
	body = append(body, bytes.Repeat([]byte("y"), n-len(prefix)-len(suffix))...)
	body = append(body, suffix...)
	return signedHead(t, addr, "PutItem", body, int64(n))
}

func signedHead(t *testing.T, addr, op string, body []byte, length int64) []byte {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, "http://"+addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	r.Header.Set("Content-Type", "application/x-amz-json-1.0")
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: keyID, SecretAccessKey: secret},
		r, hex.EncodeToString(sum[:]), "dynamodb", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST / HTTP/1.1\r\nHost: %s\r\n", addr)
	for k, vs := range r.Header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", length)
	return b.Bytes()
}

// cpuTime reads the process's user+system CPU time from /proc.
func cpuTime(t *testing.T, pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ 100
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rss reads the process's resident set size from /proc.
func rss(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		if runtime.GOOS != "linux" {
			t.Skip("needs /proc")
		}
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitHealthy(t *testing.T, endpoint string) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := http.Get(endpoint + "/health"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("server not healthy")
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
