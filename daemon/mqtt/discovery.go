// SPDX-License-Identifier: Apache-2.0

package mqtt

import (
	"encoding/json"
)

// docsURL is where a user reads about the entities (the device page's
// link in Home Assistant).
const docsURL = "https://github.com/macake/macake/blob/main/docs/OPERATIONS.md#home-assistant-and-mqtt"

// entity is one Home Assistant MQTT discovery config
// (https://www.home-assistant.io/integrations/mqtt/#mqtt-discovery),
// with the keys macake uses.
type entity struct {
	Name              string         `json:"name"`
	UniqueID          string         `json:"unique_id"`
	StateTopic        string         `json:"state_topic"`
	ValueTemplate     string         `json:"value_template"`
	CommandTopic      string         `json:"command_topic,omitempty"`
	PayloadOn         string         `json:"payload_on,omitempty"`
	PayloadOff        string         `json:"payload_off,omitempty"`
	DeviceClass       string         `json:"device_class,omitempty"`
	StateClass        string         `json:"state_class,omitempty"`
	Unit              string         `json:"unit_of_measurement,omitempty"`
	Precision         *int           `json:"suggested_display_precision,omitempty"`
	Icon              string         `json:"icon,omitempty"`
	EntityCategory    string         `json:"entity_category,omitempty"`
	Availability      []availability `json:"availability"`
	AvailabilityMode  string         `json:"availability_mode,omitempty"`
	Device            device         `json:"device"`
	Origin            origin         `json:"origin"`
	component, object string
}

type availability struct {
	Topic string `json:"topic"`
}

type device struct {
	Identifiers      []string `json:"identifiers"`
	Name             string   `json:"name"`
	Manufacturer     string   `json:"manufacturer"`
	Model            string   `json:"model"`
	SWVersion        string   `json:"sw_version,omitempty"`
	ConfigurationURL string   `json:"configuration_url"`
}

type origin struct {
	Name       string `json:"name"`
	SWVersion  string `json:"sw_version,omitempty"`
	SupportURL string `json:"support_url"`
}

// The components of the entities.
const (
	componentSensor       = "sensor"
	componentSwitch       = "switch"
	componentBinarySensor = "binary_sensor"
)

// linkSensor is one of a link's sensors: its object id (appended to the
// link's name), its name after the link's, the state document's key, and
// how Home Assistant shows it.
type linkSensor struct {
	object, name, key             string
	deviceClass, stateClass, unit string
	precision                     int
	icon                          string
	diagnostic                    bool
}

// linkSensors are every sensor of a link. No object id is another's
// with a prefix and an underscore, so link names (which may hold _)
// cannot make two entities' topics meet.
var linkSensors = []linkSensor{
	{object: "download_rate", name: "download rate", key: "download_rate_mbit", deviceClass: "data_rate", stateClass: "measurement", unit: "Mbit/s", precision: 1, icon: "mdi:download"},
	{object: "upload_rate", name: "upload rate", key: "upload_rate_mbit", deviceClass: "data_rate", stateClass: "measurement", unit: "Mbit/s", precision: 1, icon: "mdi:upload"},
	{object: "download_achieved", name: "download achieved", key: "download_achieved_mbit", deviceClass: "data_rate", stateClass: "measurement", unit: "Mbit/s", precision: 1},
	{object: "upload_achieved", name: "upload achieved", key: "upload_achieved_mbit", deviceClass: "data_rate", stateClass: "measurement", unit: "Mbit/s", precision: 1},
	{object: "rtt", name: "round trip", key: "rtt_ms", deviceClass: "duration", stateClass: "measurement", unit: "ms", precision: 1, icon: "mdi:timer-outline"},
	{object: "baseline", name: "baseline round trip", key: "baseline_ms", deviceClass: "duration", stateClass: "measurement", unit: "ms", precision: 1, icon: "mdi:timer-outline"},
	{object: "grade", name: "bufferbloat grade", key: "grade", icon: "mdi:alphabetical-variant"},
	{object: "controller", name: "controller", key: "controller", icon: "mdi:state-machine", diagnostic: true},
	{object: "download_drops", name: "download drops", key: "download_drops", stateClass: "total_increasing", unit: "packets", icon: "mdi:package-variant-remove", diagnostic: true},
	{object: "upload_drops", name: "upload drops", key: "upload_drops", stateClass: "total_increasing", unit: "packets", icon: "mdi:package-variant-remove", diagnostic: true},
	{object: "paused_until", name: "paused until", key: "paused_until", deviceClass: "timestamp", icon: "mdi:pause-circle-outline"},
	{object: "advice", name: "advice on bounds", key: "advice", icon: "mdi:lightbulb-outline", diagnostic: true},
}

// shapingObject is the object id of a switch (with a link's name before
// it for a link's).
const shapingObject = "shaping"

// discovery builds the discovery configs.
type discovery struct {
	t       topics
	version string
	control bool
}

func (d discovery) device() device {
	return device{Identifiers: []string{"macake." + d.t.node}, Name: "macake " + d.t.node, Manufacturer: "macake",
		Model: "macake watch", SWVersion: d.version, ConfigurationURL: docsURL}
}

func (d discovery) origin() origin {
	return origin{Name: "macake", SWVersion: d.version, SupportURL: "https://github.com/macake/macake"}
}

// shapingSwitch is a switch of the shaping: a link's (every link's for
// ""), or a read-only binary sensor without control. It also returns the
// one it is not, whose config is to be removed.
func (d discovery) shapingSwitch(link string) (e entity, other entity) {
	e = entity{Name: "shaping", UniqueID: "macake." + d.t.node + ".shaping", object: shapingObject,
		StateTopic: d.t.state(), ValueTemplate: "{{ value_json.shaping }}", PayloadOn: payloadOn, PayloadOff: payloadOff,
		Icon: "mdi:speedometer", Availability: []availability{{d.t.availability()}}, Device: d.device(), Origin: d.origin()}
	command := d.t.command()
	if link != "" {
		e.Name = link + " shaping"
		e.UniqueID = "macake." + d.t.node + "." + link + ".shaping"
		e.object = link + "_" + shapingObject
		e.StateTopic = d.t.linkState(link)
		command = d.t.linkCommand(link)
	}
	e.component, other = componentSwitch, e
	other.component = componentBinarySensor
	if d.control {
		e.CommandTopic = command
	} else {
		e, other = other, e
		e.DeviceClass = "running"
	}
	return e, other
}

// linkEntities are a link's sensors.
func (d discovery) linkEntities(link string) []entity {
	out := make([]entity, 0, len(linkSensors))
	for _, s := range linkSensors {
		e := entity{Name: link + " " + s.name, UniqueID: "macake." + d.t.node + "." + link + "." + s.object,
			component: componentSensor, object: link + "_" + s.object,
			StateTopic: d.t.linkState(link), ValueTemplate: "{{ value_json." + s.key + " }}",
			DeviceClass: s.deviceClass, StateClass: s.stateClass, Unit: s.unit, Icon: s.icon,
			Availability:     []availability{{d.t.availability()}, {d.t.linkAvailability(link)}},
			AvailabilityMode: "all", Device: d.device(), Origin: d.origin()}
		if s.precision > 0 {
			p := s.precision
			e.Precision = &p
		}
		if s.diagnostic {
			e.EntityCategory = "diagnostic"
		}
		out = append(out, e)
	}
	return out
}

// topic is where e's config is published.
func (d discovery) topic(e entity) string { return d.t.discoveryConfig(e.component, e.object) }

// payload is e's config.
func (e entity) payload() []byte {
	b, err := json.Marshal(e)
	if err != nil {
		panic(err) // only strings, numbers and slices of them
	}
	return b
}
