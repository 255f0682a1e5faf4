package claude

import (
	"encoding/json"
	"strings"
	"testing"
)

// The validating scanner accepts exactly the JSON that encoding/json
// accepts (the stream-json lines a user's run produces are parsed by it),
// and decodes the values the same.

// scanCorpus is valid and invalid JSON around every branch of the scanner.
var scanCorpus = []string{
	`{}`, `{ }`, "{\t\r\n}", ` {} `, `{"a":1}`, `{ "a" : 1 , "b" : 2 }`, `{"a":[]}`, `{"a":[ ]}`,
	`{"a":[1]}`, `{"a":[1,2]}`, `{"a":[ 1 , 2 ]}`, `{"a":[1,]}`, `{"a":[1 2]}`, `{"a":[,1]}`, `{"a":[1`,
	`{"a":[`, `{"a":{}}`, `{"a":{"b":{}}}`, `{"a":{"b":1,}}`, `{"a":{"b"}}`, `{"a":{1:2}}`, `{"a":{"b":1`,
	`{"a"`, `{"a":`, `{"a" 1}`, `{"a":1 "b":2}`, `{"a":1;}`, `{,}`, `{`, `}`, ``, ` `, `{"a":1}}`,
	`{"a":true}`, `{"a":false}`, `{"a":null}`, `{"a":tru}`, `{"a":fals}`, `{"a":nul}`, `{"a":t}`,
	`{"a":truex}`, `{"a":nulll}`, `{"a":TRUE}`, `{"a":undefined}`,
	`{"a":0}`, `{"a":-0}`, `{"a":-}`, `{"a":01}`, `{"a":-01}`, `{"a":10}`, `{"a":1.5}`, `{"a":1.}`,
	`{"a":.5}`, `{"a":1e5}`, `{"a":1E5}`, `{"a":1e+5}`, `{"a":1e-5}`, `{"a":1e}`, `{"a":1e+}`,
	`{"a":1.5e3}`, `{"a":-1.5E-3}`, `{"a":1.e3}`, `{"a":+1}`, `{"a":0x1}`, `{"a":9}`, `{"a":-9}`,
	`{"a":1`, `{"a":-`, `{"a":1.`, `{"a":1e`, `{"a":0`, `{"a":-0.0e0}`,
	`{"a":""}`, `{"a":"x"}`, `{"a":"\""}`, `{"a":"\\"}`, `{"a":"\/"}`, `{"a":"\b\f\n\r\t"}`, `{"a":"\q"}`,
	`{"a":"\u00e9"}`, `{"a":"\u00E9"}`, `{"a":"\uABCD"}`, `{"a":"\u09aF"}`, `{"a":"\u00g9"}`, `{"a":"\u00"}`,
	`{"a":"\u004"}`, `{"a":"\u0041`, `{"a":"\u00e`, `{"a":"\`, `{"a":"x`, `{"a":"\ud83d\ude00"}`,
	`{"a":"é"}`, "{\"a\":\"\x1f\"}", "{\"a\":\"\x7f\"}", "{\"a\":\" \"}", "{\"a\":\"\xff\"}",
	`{"\u0074ype":"x"}`, `{"t\"y":"x"}`, `{"é":"x"}`, `{"a":"x"} x`, `{"a":"x"}  `, "{\"a\":1}\n",
	`[]`, `[1]`, `"s"`, `1`, `null`, `true`, `x`, `{"a":[{"b":[{"c":"d"}]},{"e":[]}]}`,
}

func TestScanAcceptsExactlyValidJSONObjects(t *testing.T) {
	t.Parallel()
	check := func(doc string) {
		t.Helper()
		trimmed := strings.TrimLeft(doc, " \t\r\n")
		want := json.Valid([]byte(doc)) && trimmed != "" && trimmed[0] == '{'
		got := map[string]string{}
		err := walkObject([]byte(doc), func(k, v []byte) error {
			s, err := jsonString(string(k), v)
			if err == nil {
				got[string(k)] = s
			} else {
				got[string(k)] = "raw:" + string(v)
			}
			return nil
		})
		if (err == nil) != want {
			t.Errorf("walkObject(%q) error = %v, want valid = %v", doc, err, want)
			return
		}
		if err != nil {
			return
		}
		var ref map[string]json.RawMessage
		if err := json.Unmarshal([]byte(doc), &ref); err != nil {
			t.Fatal(err)
		}
		if len(ref) != len(got) {
			t.Errorf("walkObject(%q) keys %v, encoding/json %d keys", doc, got, len(ref))
		}
		for k, raw := range ref {
			var s string
			if json.Unmarshal(raw, &s) == nil && raw[0] == '"' {
				if got[k] != s {
					t.Errorf("walkObject(%q) key %q = %q, want %q", doc, k, got[k], s)
				}
			} else if got[k] != "raw:"+string(raw) && string(raw) != "null" {
				t.Errorf("walkObject(%q) key %q = %q, want raw %s", doc, k, got[k], raw)
			}
		}
	}
	for _, doc := range scanCorpus {
		check(doc)
		// Every prefix of a document is judged like encoding/json does.
		for i := range len(doc) {
			check(doc[:i])
		}
	}
}

func TestScanNestingLimitIs10000(t *testing.T) {
	t.Parallel()
	for _, depth := range []int{9999, 10000, 10001} {
		// The object itself is one level.
		doc := `{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
		err := walkObject([]byte(doc), func(_, _ []byte) error { return nil })
		if (err == nil) != (depth <= 10000) {
			t.Errorf("depth %d: error %v", depth, err)
		}
		if (err == nil) != json.Valid([]byte(doc)) {
			t.Errorf("depth %d: walkObject and encoding/json disagree", depth)
		}
		doc = `{"a":` + strings.Repeat(`{"b":`, depth-1) + "1" + strings.Repeat("}", depth-1) + `}`
		err = walkObject([]byte(doc), func(_, _ []byte) error { return nil })
		if (err == nil) != (depth <= 10000) {
			t.Errorf("object depth %d: error %v", depth, err)
		}
	}
	// Siblings do not add up: 20000 empty arrays and objects side by side
	// are two levels deep.
	for _, sib := range []string{"[]", "[1]", "{}", `{"x":1}`} {
		doc := `{"a":[` + strings.TrimSuffix(strings.Repeat(sib+",", 20000), ",") + `]}`
		if err := walkObject([]byte(doc), func(_, _ []byte) error { return nil }); err != nil {
			t.Errorf("20000 sibling %s: %v", sib, err)
		}
	}
	arr := `[` + strings.TrimSuffix(strings.Repeat("[],", 20000), ",") + `]`
	if err := walkArray([]byte(arr), func(_ []byte) error { return nil }); err != nil {
		t.Errorf("walkArray of 20000 empty arrays: %v", err)
	}
	deep := `[` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `]`
	if err := walkArray([]byte(deep), func(_ []byte) error { return nil }); err != nil {
		t.Errorf("walkArray 10000 deep: %v", err)
	}
	deep = `[` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `]`
	if err := walkArray([]byte(deep), func(_ []byte) error { return nil }); err == nil {
		t.Errorf("walkArray 10001 deep accepted")
	}
}

func TestWalkArrayAcceptsExactlyValidArrays(t *testing.T) {
	t.Parallel()
	docs := []string{`[]`, `[ ]`, ` [ ] `, `[1]`, `[ 1 ]`, `[1,2]`, `[ 1 , 2 ]`, `["a","b"]`, `[{}]`, `[[],{}]`,
		`[1,]`, `[,1]`, `[1 2]`, `[1`, `[1,`, `[`, `]`, ``, ` `, `[1] x`, `[1]]`, `{}`, `"a"`, `[tru]`, "[1]\n"}
	for _, doc := range docs {
		var elems []string
		err := walkArray([]byte(doc), func(v []byte) error {
			elems = append(elems, string(v))
			return nil
		})
		trimmed := strings.TrimLeft(doc, " \t\r\n")
		want := json.Valid([]byte(doc)) && trimmed != "" && trimmed[0] == '['
		if (err == nil) != want {
			t.Errorf("walkArray(%q) error = %v, want valid = %v", doc, err, want)
			continue
		}
		if err != nil {
			continue
		}
		var ref []json.RawMessage
		if err := json.Unmarshal([]byte(doc), &ref); err != nil {
			t.Fatal(err)
		}
		if len(ref) != len(elems) {
			t.Errorf("walkArray(%q) = %q, want %d elements", doc, elems, len(ref))
		}
		for i := range min(len(ref), len(elems)) {
			if string(ref[i]) != elems[i] {
				t.Errorf("walkArray(%q)[%d] = %q, want %q", doc, i, elems[i], ref[i])
			}
		}
	}
}

func TestJSONScalars(t *testing.T) {
	t.Parallel()
	ints := map[string]int64{`0`: 0, `1200`: 1200, `-3`: -3, `null`: 0, `1.5e3`: 1500, `2.9`: 2, `1e2`: 100}
	for raw, want := range ints {
		if got, err := jsonInt("n", []byte(raw)); err != nil || got != want {
			t.Errorf("jsonInt(%s) = %d, %v; want %d", raw, got, err, want)
		}
	}
	for _, raw := range []string{`"1"`, `true`, `x`, ``, `[1]`} {
		if _, err := jsonInt("n", []byte(raw)); err == nil || err.Error() != "field n is not an integer" {
			t.Errorf("jsonInt(%s) error = %v", raw, err)
		}
	}
	floats := map[string]float64{`0`: 0, `0.25`: 0.25, `-1.5`: -1.5, `9`: 9, `null`: 0, `1e-2`: 0.01}
	for raw, want := range floats {
		if got, err := jsonFloat("f", []byte(raw)); err != nil || got != want {
			t.Errorf("jsonFloat(%s) = %v, %v; want %v", raw, got, err, want)
		}
	}
	for _, raw := range []string{`"1"`, `true`, `x`, ``, `-`, `.5`, `/`, `:`} {
		if _, err := jsonFloat("f", []byte(raw)); err == nil || err.Error() != "field f is not a number" {
			t.Errorf("jsonFloat(%s) error = %v", raw, err)
		}
	}
	bools := map[string]bool{`true`: true, `false`: false, `null`: false}
	for raw, want := range bools {
		if got, err := jsonBool("b", []byte(raw)); err != nil || got != want {
			t.Errorf("jsonBool(%s) = %v, %v", raw, got, err)
		}
	}
	if _, err := jsonBool("b", []byte(`1`)); err == nil || err.Error() != "field b is not a boolean" {
		t.Errorf("jsonBool(1) error = %v", err)
	}
	strs := map[string]string{`"x"`: "x", `null`: "", `""`: "", `"a\"b"`: `a"b`, `"\u00e9"`: "é", `"é"`: "é", "\"a\x7fb\"": "a\x7fb"}
	for raw, want := range strs {
		if got, err := jsonString("s", []byte(raw)); err != nil || got != want {
			t.Errorf("jsonString(%s) = %q, %v; want %q", raw, got, err, want)
		}
		if got, err := jsonStringLike("s", []byte(raw), "", "x", "a", `a\"b`); err != nil || got != want {
			t.Errorf("jsonStringLike(%s) = %q, %v; want %q", raw, got, err, want)
		}
	}
	for _, raw := range []string{`1`, `true`, ``, `[]`} {
		if _, err := jsonString("s", []byte(raw)); err == nil || err.Error() != "field s is not a string" {
			t.Errorf("jsonString(%s) error = %v", raw, err)
		}
	}
}
