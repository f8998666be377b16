// The idle facts drawn by Qt Quick: what the screen shows when no web view can be shown (a
// render process that crashed, an item that failed with nothing left behind it).
import QtQuick

Rectangle {
    id: cover

    // Its fade (Fade.qml), started and ended by its region's layer stack (layerstack.py).
    readonly property QtObject fade: fader

    property string name: "pdn display"
    property string apiUrl: ""
    property string addresses: ""
    readonly property real unit: Math.max(8, Math.min(width, height) / 100)

    anchors.fill: parent

    gradient: Gradient {
        orientation: Gradient.Vertical
        GradientStop { position: 0.0; color: "#16324a" }
        GradientStop { position: 1.0; color: "#275a73" }
    }

    Column {
        x: cover.width * 0.08
        y: cover.height * 0.3
        width: cover.width * 0.84
        spacing: cover.unit * 3
        Text {
            width: parent.width
            text: cover.name
            color: "#eef4f8"
            font.family: "DejaVu Sans"
            font.pixelSize: cover.unit * 8
            elide: Text.ElideRight
        }
        Text {
            width: parent.width
            text: "Display API  " + cover.apiUrl
            color: "#c9dde9"
            font.family: "DejaVu Sans"
            font.pixelSize: cover.unit * 3
            elide: Text.ElideRight
        }
        Text {
            width: parent.width
            text: "Addresses  " + cover.addresses
            color: "#c9dde9"
            font.family: "DejaVu Sans"
            font.pixelSize: cover.unit * 3
            elide: Text.ElideRight
        }
    }
    Fade { id: fader; target: cover }
}
