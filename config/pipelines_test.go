package config

import (
	"strings"
	"testing"
)

func TestPipelinesConfig(t *testing.T) {
	c, err := Load(write(t, "[pipelines]\nlisten = \"127.0.0.1:0\"\nrate = 7\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Pipelines.Listen != "127.0.0.1:0" || c.Pipelines.Rate != 7 || c.Pipelines.LogRate != DefaultPipelineLogRate || c.Pipelines.MaxStreams != DefaultPipelineMaxStreams {
		t.Errorf("pipelines %+v", c.Pipelines)
	}
	for in, want := range map[string]string{
		"[pipelines]\nlisten = \"nonsense\"\n":   "pipelines.listen",
		"[pipelines]\ntls_cert = \"cert.pem\"\n": "pipelines.tls_cert",
		"[pipelines]\nlog_rate = -1\n":           "pipelines.rate",
	} {
		if _, err := Load(write(t, in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %s", in, err, want)
		}
	}
}
