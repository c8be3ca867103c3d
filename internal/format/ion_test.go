package format

import (
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
)

func TestIonLine(t *testing.T) {
	it, err := attr.DecodeItem([]byte(`{"pk":{"S":"a\"b\\c\n"},"n":{"N":"-12.5"},"i":{"N":"7"},"e":{"N":"1.5E+20"},` +
		`"b":{"B":"AAE="},"t":{"BOOL":true},"z":{"NULL":true},"l":{"L":[{"S":"x"},{"N":"1"}]},` +
		`"m":{"M":{"it's":{"S":"é"}}},"ss":{"SS":["a","b"]},"ns":{"NS":["1","2.5"]},"bs":{"BS":["AQ=="]}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := string(AppendIonLine(nil, it))
	want := `{Item:{'b':{{AAE=}},'bs':$dynamodb_BS::[{{AQ==}}],'e':150000000000000000000.,'i':7.,'l':["x",1.],'m':{'it\'s':"é"},` +
		`'n':-12.5,'ns':$dynamodb_NS::[1.,2.5],'pk':"a\"b\\c\x0a",'ss':$dynamodb_SS::["a","b"],'t':true,'z':null}}` + "\n"
	if got != want {
		t.Fatalf("ion line:\n got %s\nwant %s", got, want)
	}
}

func TestIonDecimal(t *testing.T) {
	for in, want := range map[string]string{"5": "5.", "-0.25": "-0.25", "1E+5": "1d5", "1.5e-3": "1.5d-3"} {
		if got := IonDecimal(in); got != want {
			t.Errorf("IonDecimal(%s) = %s, want %s", in, got, want)
		}
	}
}
